"""The loss masks of generative encoding mark the tokens TRL's SFTTrainer trains on: the
completion of a prompt-completion pair (TRL's completion-only mask), the assistant turns of a
chat (TRL's assistant-only mask, from a template with `{% generation %}` markers), every token
with `train_on_prompt`; a chat is rendered as `apply_chat_template` renders it; a sequence too
long loses its prompt's start, never its answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import transformers as T
from serve_helpers import CHAT_TEMPLATE
from tiny_models import save_tiny_llama

from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.data.generative import Conversation, PromptCompletion, Turn
from adaptlab.data.generative_encoding import (
    EncodedExample,
    GenerativeEncoder,
    Seq2SeqEncoder,
)
from adaptlab.errors import AdaptlabError, ConfigError, DataError

trl = pytest.importorskip("trl", reason="trl comes with the integrations extra")
datasets = pytest.importorskip("datasets")

TRAINING_TEMPLATE = (
    Path(trl.__file__).parent / "chat_templates" / "llama3_training.jinja"
).read_text()
"""TRL's Llama 3 template with `{% generation %}` around each assistant message."""

PAIRS = [
    PromptCompletion("What is the capital of France?", " Paris"),
    PromptCompletion("Translate to German: good morning\n", "Guten Morgen!"),
    PromptCompletion("Add 2 and 3. Answer:", " 5, of course.\nDone."),
    PromptCompletion("Already ends with the end token:", " yes [SEP]"),
    PromptCompletion("", "a completion with an empty prompt"),
    PromptCompletion("Ünïcödé prompt ", "ça marche"),
]

CHATS = [
    Conversation((Turn("user", "Hi there"), Turn("assistant", "Hello, friend!"))),
    Conversation(
        (
            Turn("system", "Be brief."),
            Turn("user", "Capital of France?"),
            Turn("assistant", "Paris."),
            Turn("user", "And of Spain?"),
            Turn("assistant", "Madrid, since 1561."),
        )
    ),
    Conversation(
        (
            Turn("user", "Count to two."),
            Turn("assistant", "One, two."),
            Turn("user", "Thanks!"),
        )
    ),
]


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random Llama with the MiniLM tokenizer, its chat template TRL's Llama 3 one."""
    folder = save_tiny_llama(str(tmp_path_factory.mktemp("tiny-llama")))
    tokenizer = T.AutoTokenizer.from_pretrained(folder)
    tokenizer.chat_template = TRAINING_TEMPLATE
    tokenizer.save_pretrained(folder)
    return folder


def tokenizer_of(folder: str) -> Any:
    """The model's tokenizer, its EOS the separator token (MiniLM has no EOS of its own)."""
    tokenizer = T.AutoTokenizer.from_pretrained(folder)
    tokenizer.eos_token = tokenizer.sep_token
    return tokenizer


def trl_rows(folder: str, rows: dict[str, list[Any]], tmp_path: Path, **options: Any) -> list:
    """(input_ids, labels) of each row as SFTTrainer prepares its training set for the tiny
    Llama (its EOS the separator token)."""
    model = T.AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = T.AutoTokenizer.from_pretrained(folder)
    return sft_rows(model, tokenizer, rows, tmp_path, eos_token=tokenizer.sep_token, **options)


def sft_rows(
    model: Any, tokenizer: Any, rows: dict[str, list[Any]], tmp_path: Path, **options: Any
) -> list:
    """(input_ids, labels) of each row as SFTTrainer prepares its training set."""
    config = trl.SFTConfig(
        str(tmp_path), max_length=None, use_cpu=True, report_to="none", **options
    )
    trainer = trl.SFTTrainer(
        model=model,
        args=config,
        train_dataset=datasets.Dataset.from_dict(rows),
        processing_class=tokenizer,
    )
    data = trainer.train_dataset
    return list(zip(data["input_ids"], data["labels"], strict=True))


def ours(encoder: GenerativeEncoder, examples: list[Any]) -> list:
    """(input_ids, labels) of each example as lists."""
    encoded = [encoder.encode(example) for example in examples]
    assert all(item is not None for item in encoded)
    return [(list(item.input_ids), list(item.labels)) for item in encoded if item is not None]


def messages(chat: Conversation) -> list[dict[str, str]]:
    return [{"role": turn.role, "content": turn.content} for turn in chat.turns]


def test_completion_labels_mark_the_tokens_of_trls_completion_only_mask(
    llama: str, tmp_path: Path
) -> None:
    rows = {"prompt": [p.prompt for p in PAIRS], "completion": [p.completion for p in PAIRS]}
    expected = trl_rows(llama, rows, tmp_path)
    got = ours(GenerativeEncoder(tokenizer_of(llama), 512), PAIRS)
    assert got == expected
    assert all(IGNORE_INDEX in labels and set(labels) != {IGNORE_INDEX} for _, labels in got)


def test_train_on_prompt_labels_every_token_as_trl_without_completion_only_loss(
    llama: str, tmp_path: Path
) -> None:
    rows = {"prompt": [p.prompt for p in PAIRS], "completion": [p.completion for p in PAIRS]}
    expected = trl_rows(llama, rows, tmp_path, completion_only_loss=False)
    encoder = GenerativeEncoder(tokenizer_of(llama), 512, train_on_prompt=True)
    got = ours(encoder, PAIRS)
    assert got == expected
    assert all(ids == labels for ids, labels in got)


def test_chat_labels_mark_the_tokens_of_trls_assistant_only_mask(
    llama: str, tmp_path: Path
) -> None:
    expected = trl_rows(
        llama, {"messages": [messages(c) for c in CHATS]}, tmp_path, assistant_only_loss=True
    )
    got = ours(GenerativeEncoder(tokenizer_of(llama), 512), CHATS)
    assert got == expected
    tokenizer = tokenizer_of(llama)
    for (_, labels), chat in zip(got, CHATS, strict=True):
        trained = tokenizer.decode([t for t in labels if t != IGNORE_INDEX])
        answers = [turn.content for turn in chat.turns if turn.role == "assistant"]
        assert trained.count("eot") == len(answers)  # every turn learns to end
        for answer in answers:
            assert (
                tokenizer.decode(tokenizer(answer, add_special_tokens=False)["input_ids"])
                in trained
            )
        assert "capital" not in trained and "thanks" not in trained


def test_the_assistant_mask_of_a_template_from_a_file_is_trls_too(llama: str) -> None:
    tokenizer = tokenizer_of(llama)
    tokenizer.chat_template = None
    encoder = GenerativeEncoder(tokenizer, 512, chat_template=TRAINING_TEMPLATE)
    for chat in CHATS:
        expected = tokenizer.apply_chat_template(
            messages(chat),
            chat_template=TRAINING_TEMPLATE,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        encoded = encoder.encode(chat)
        assert encoded is not None
        assert list(encoded.input_ids) == expected["input_ids"]
        trained = [label != IGNORE_INDEX for label in encoded.labels]
        assert trained == [bool(bit) for bit in expected["assistant_masks"]]


@pytest.mark.parametrize("template", (CHAT_TEMPLATE, TRAINING_TEMPLATE))
def test_chats_render_as_apply_chat_template_and_prompts_open_the_last_answer(
    llama: str, template: str
) -> None:
    tokenizer = tokenizer_of(llama)
    encoder = GenerativeEncoder(tokenizer, 512, chat_template=template, train_on_prompt=True)
    for chat in CHATS:
        encoded = encoder.encode(chat)
        assert encoded is not None
        whole = tokenizer.apply_chat_template(messages(chat), chat_template=template)
        assert list(encoded.input_ids) == list(whole["input_ids"])
        assert encoded.labels == encoded.input_ids
        last = max(i for i, turn in enumerate(chat.turns) if turn.role == "assistant")
        opened = tokenizer.apply_chat_template(
            messages(chat)[:last], chat_template=template, add_generation_prompt=True
        )
        assert encoder.prompt_ids(chat) == list(opened["input_ids"])
        assert encoder.reference(chat) == chat.turns[last].content


def test_a_pairs_prompt_ids_begin_its_training_sequence(llama: str) -> None:
    tokenizer = tokenizer_of(llama)
    encoder = GenerativeEncoder(tokenizer, 512)
    pair = PAIRS[0]
    encoded = encoder.encode(pair)
    assert encoded is not None
    prompt = encoder.prompt_ids(pair)
    assert list(encoded.input_ids[: len(prompt)]) == prompt
    assert set(encoded.labels[: len(prompt)]) == {IGNORE_INDEX}
    assert encoded.labels[len(prompt)] != IGNORE_INDEX
    assert encoder.reference(pair) == " Paris"
    assert len(GenerativeEncoder(tokenizer, 4).prompt_ids(pair)) == 3


def test_a_long_prompt_loses_its_start_and_an_answer_that_cannot_fit_is_dropped(
    llama: str,
) -> None:
    tokenizer = tokenizer_of(llama)
    pair = PromptCompletion("one two three four five six seven eight", " nine ten")
    full = GenerativeEncoder(tokenizer, 512).encode(pair)
    assert full is not None
    answer = sum(label != IGNORE_INDEX for label in full.labels)
    assert answer == 4  # nine, ten, the EOS appended and the [SEP] MiniLM ends a text with
    for length in (answer + 1, answer + 4, len(full.input_ids)):
        cut = GenerativeEncoder(tokenizer, length).encode(pair)
        assert cut == EncodedExample(full.input_ids[-length:], full.labels[-length:])
    for length in (2, answer):  # no token left before the answer
        assert GenerativeEncoder(tokenizer, length).encode(pair) is None
    split = GenerativeEncoder(tokenizer, answer).encode_split([pair, PromptCompletion("a", "b")])
    assert split.dropped == 1 and len(split.examples) == 1


def test_a_long_chat_loses_its_earliest_turns_and_keeps_its_last_answer(llama: str) -> None:
    tokenizer = tokenizer_of(llama)
    chat = CHATS[1]
    full = GenerativeEncoder(tokenizer, 512).encode(chat)
    assert full is not None
    last = GenerativeEncoder(tokenizer, 512).encode(
        Conversation((Turn("user", "x"), chat.turns[-1]))
    )
    assert last is not None
    tail = sum(label != IGNORE_INDEX for label in last.labels)  # madrid ... <|eot_id|>
    for length in (tail + 1, len(full.input_ids) - 1):
        cut = GenerativeEncoder(tokenizer, length).encode(chat)
        assert cut == EncodedExample(full.input_ids[-length:], full.labels[-length:])
    assert GenerativeEncoder(tokenizer, tail).encode(chat) is None
    assert GenerativeEncoder(tokenizer, tail).encode_split(CHATS[1:2]).dropped == 1


def test_seq2seq_reads_the_prompt_and_learns_the_completion_and_its_end(llama: str) -> None:
    tokenizer = tokenizer_of(llama)
    pair = PromptCompletion("summarize: the cat sat on the mat", "a cat sat")
    encoded = Seq2SeqEncoder(tokenizer, 64).encode(pair)
    assert encoded is not None
    assert list(encoded.input_ids) == tokenizer(pair.prompt)["input_ids"]
    completion = tokenizer(pair.completion, add_special_tokens=False)["input_ids"]
    assert list(encoded.labels) == [*completion, tokenizer.eos_token_id]
    short = Seq2SeqEncoder(tokenizer, 4)
    assert short.prompt_ids(pair) == tokenizer(pair.prompt)["input_ids"][-4:]
    assert short.encode(pair) == EncodedExample(tuple(short.prompt_ids(pair)), encoded.labels)
    assert Seq2SeqEncoder(tokenizer, 3).encode(pair) is None
    assert Seq2SeqEncoder(tokenizer, 3).encode_split([pair]).dropped == 1
    assert short.reference(pair) == "a cat sat"
    with pytest.raises(ConfigError, match="prompt-completion pairs, not chats"):
        short.encode(CHATS[0])


def one_line(error: pytest.ExceptionInfo[AdaptlabError], *needles: str) -> None:
    message = str(error.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, (needle, message)


def test_a_tokenizer_without_a_chat_template_is_told_to_pass_one(llama: str) -> None:
    tokenizer = tokenizer_of(llama)
    tokenizer.chat_template = None
    encoder = GenerativeEncoder(tokenizer, 64)
    assert encoder.encode(PAIRS[0]) is not None  # pairs need no template
    with pytest.raises(ConfigError) as error:
        encoder.encode(CHATS[0])
    one_line(error, "has no chat template", "--chat-template FILE")


def test_a_template_that_fails_or_renders_the_past_differently_is_one_line(llama: str) -> None:
    tokenizer = tokenizer_of(llama)
    failing = "{{ raise_exception('roles must alternate\\nreally') }}"
    with pytest.raises(ConfigError) as error:
        GenerativeEncoder(tokenizer, 64, chat_template=failing).encode(CHATS[0])
    one_line(
        error,
        "the chat template passed as chat_template cannot render",
        "roles must alternate",
        "; pass a chat template that renders system, user and assistant messages",
    )
    # marks the last message: a turn renders one way last and another with more after it
    shifting = (
        "{% for m in messages %}{% if loop.last %}last {% endif %}{{ m.role }}: {{ m.content }}"
        "{% endfor %}"
    )
    with pytest.raises(ConfigError) as error:
        GenerativeEncoder(tokenizer, 64, chat_template=shifting).encode(CHATS[1])
    one_line(error, "passed as chat_template renders message 3 (assistant) differently")
    silent = (
        "{% for m in messages %}{% if m.role == 'user' %}{{ m.content }} {% endif %}{% endfor %}"
    )
    with pytest.raises(ConfigError) as error:
        GenerativeEncoder(tokenizer, 64, chat_template=silent).encode(CHATS[0])
    one_line(error, "does not write what the assistant says", "learn empty answers")


def test_encoders_refuse_what_they_cannot_encode(llama: str) -> None:
    tokenizer = tokenizer_of(llama)
    with pytest.raises(ConfigError, match="max_length must be at least 2"):
        GenerativeEncoder(tokenizer, 1)
    with pytest.raises(ConfigError, match="pick at most 512"):
        Seq2SeqEncoder(tokenizer, 513)
    bad = Conversation((Turn("user", "hi"), Turn("user", "again")))
    with pytest.raises(DataError, match="message 2 is user after user"):
        GenerativeEncoder(tokenizer, 64).encode(bad)
    tokenizer.eos_token = None
    with pytest.raises(ConfigError) as error:
        GenerativeEncoder(tokenizer, 64).encode(PAIRS[0])
    one_line(error, "has no EOS token", "tokenizer.eos_token")
    with pytest.raises(ConfigError, match="has no EOS token"):
        Seq2SeqEncoder(tokenizer, 64).encode(PAIRS[0])


SMOLLM2_MARKED = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\n' }}{% generation %}{{ message['content'] + '<|im_end|>' + "
    "'\n' }}{% endgeneration %}{% else %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""SmolLM2's chat template with `{% generation %}` around each assistant message's text and
end of turn."""


@pytest.mark.real
def test_smollm2_masks_are_trls_with_its_real_tokenizer_and_template(tmp_path: Path) -> None:
    from adaptlab.models.loading import load_model, load_tokenizer

    tokenizer = load_tokenizer("smollm2-135m")
    model = load_model("smollm2-135m", "causal_lm").model
    pairs = [pair for pair in PAIRS if pair.prompt]
    rows = {"prompt": [p.prompt for p in pairs], "completion": [p.completion for p in pairs]}
    expected = sft_rows(model, load_tokenizer("smollm2-135m"), rows, tmp_path)
    encoder = GenerativeEncoder(tokenizer, 2048)
    assert ours(encoder, pairs) == expected
    # SmolLM2 writes no token before a text: nothing predicts an empty prompt's first answer
    assert encoder.encode(PromptCompletion("", "Paris")) is None
    with pytest.raises(DataError, match="gives no token before its completion"):
        encoder.prompt_ids(PromptCompletion("", "Paris"))
    for chat in CHATS:
        assert tokenizer.apply_chat_template(
            messages(chat), chat_template=SMOLLM2_MARKED, tokenize=False
        ) == tokenizer.apply_chat_template(messages(chat), tokenize=False)
        marked = tokenizer.apply_chat_template(
            messages(chat),
            chat_template=SMOLLM2_MARKED,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        encoded = encoder.encode(chat)
        assert encoded is not None
        assert list(encoded.input_ids) == marked["input_ids"]
        trained = [label != IGNORE_INDEX for label in encoded.labels]
        assert trained == [bool(bit) for bit in marked["assistant_masks"]]
        assert tokenizer.decode(encoded.input_ids[trained.index(True)]) != "\n"

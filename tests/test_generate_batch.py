"""Generation for evaluation (`generate_batch`) on a tiny random Llama: greedy texts equal
`model.generate` for prompts of different lengths decoded together, with and without an
adapter active; seeded sampling repeats; stop strings, the end-of-text token and
max_new_tokens end a text; the model's mode is kept; bad arguments fail in one line."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from generative_helpers import greedy
from tiny_models import save_tiny_llama, tiny_model

import adaptlab
from adaptlab.engine.generate import generate_batch
from adaptlab.errors import AdaptlabError
from adaptlab.methods.adapt import set_active
from adaptlab.models.loading import load_model, load_tokenizer
from adaptlab.progress import Progress

TEXTS = ["paris is", "the cat sat on the mat and then", "one two three four five six seven"]
NEAR_TIE = 1e-4
"""Logits this close may swap places between a batch of one and a padded batch."""


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny Llama, its tokenizer, prompts of three lengths, and a copy with a random LoRA."""
    folder = save_tiny_llama(str(tmp_path_factory.mktemp("generate") / "llama"))
    tokenizer = load_tokenizer(folder)
    prompts = [tokenizer(text).input_ids for text in TEXTS]
    assert len({len(p) for p in prompts}) == len(prompts)
    adapted = load_model(folder, "causal_lm").model.eval()
    handle = adaptlab.add_adapter(adapted, "default", "lora", seed=0, train_head=False)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # far from the identity, so the adapter changes the text
        for tensor in handle.tensors().values():
            tensor.add_(0.5 * torch.randn(tensor.shape, generator=generator))
    set_active(adapted, "default")
    return {
        "model": load_model(folder, "causal_lm").model.eval(),
        "adapted": adapted,
        "tokenizer": tokenizer,
        "prompts": prompts,
    }


def assert_greedy(text: str, model: Any, tokenizer: Any, ids: list[int], count: int) -> None:
    """`text` is `model.generate`'s text, or leaves it only at a step whose two best logits
    are within rounding of each other (the padded batch computes in another order)."""
    tokens, logits = greedy(model, ids, count)
    wanted = tokenizer.decode(tokens, skip_special_tokens=True)
    if text == wanted:
        return
    step = max(k for k in range(len(tokens) + 1) if text.startswith(tokenizer.decode(tokens[:k])))
    top = logits[step].topk(2).values
    assert step < len(tokens) and float(top[0] - top[1]) < NEAR_TIE, (text, wanted)


@pytest.mark.parametrize("batch_size", [1, 2, 16])
@pytest.mark.parametrize("which", ["model", "adapted"])
def test_greedy_texts_equal_model_generate(
    llama: dict[str, Any], which: str, batch_size: int
) -> None:
    """All prompts in one batch (16), a prompt joining when another ends (2), one at a time."""
    model, tokenizer, prompts = llama[which], llama["tokenizer"], llama["prompts"]
    texts = generate_batch(model, tokenizer, prompts, max_new_tokens=12, batch_size=batch_size)
    assert len(texts) == len(prompts)
    for text, ids in zip(texts, prompts, strict=True):
        assert_greedy(text, model, tokenizer, ids, 12)


def test_the_active_adapter_is_what_generates(llama: dict[str, Any]) -> None:
    tokenizer, prompts = llama["tokenizer"], llama["prompts"]
    base = generate_batch(llama["model"], tokenizer, prompts, max_new_tokens=12)
    adapted = generate_batch(llama["adapted"], tokenizer, prompts, max_new_tokens=12)
    assert base != adapted


def test_texts_come_back_in_prompt_order_with_progress(llama: dict[str, Any]) -> None:
    tokenizer, prompts = llama["tokenizer"], llama["prompts"]
    forward = generate_batch(llama["model"], tokenizer, prompts, max_new_tokens=6)
    bar = Progress(len(prompts), enabled=False)
    backward = generate_batch(
        llama["model"], tokenizer, prompts[::-1], max_new_tokens=6, batch_size=2, progress=bar
    )
    assert backward == forward[::-1]
    assert bar.done == len(prompts)
    assert generate_batch(llama["model"], tokenizer, [], max_new_tokens=6) == []


def test_seeded_sampling_repeats_and_seeds_differ(llama: dict[str, Any]) -> None:
    model, tokenizer, prompts = llama["model"], llama["tokenizer"], llama["prompts"]
    sampled = {"max_new_tokens": 12, "temperature": 1.5}
    first = generate_batch(model, tokenizer, prompts, **sampled, seed=7)
    again = generate_batch(model, tokenizer, prompts, **sampled, seed=7, batch_size=1)
    other = generate_batch(model, tokenizer, prompts, **sampled, seed=8)
    assert first == again
    assert first != other
    same = generate_batch(model, tokenizer, [prompts[0]] * 4, **sampled, seed=7)
    assert len(set(same)) > 1  # each prompt draws with its own generator
    nucleus = generate_batch(model, tokenizer, prompts, **sampled, top_p=1e-9, seed=3)
    assert nucleus == generate_batch(model, tokenizer, prompts, max_new_tokens=12)


def test_stop_strings_cut_the_text_before_them(llama: dict[str, Any]) -> None:
    model, tokenizer, prompts = llama["model"], llama["tokenizer"], llama["prompts"]
    full = generate_batch(model, tokenizer, prompts, max_new_tokens=12)
    words = full[0].split()
    assert len(words) >= 3  # the MiniLM vocabulary decodes to words with spaces between
    cut = generate_batch(model, tokenizer, prompts, max_new_tokens=12, stop=["zzz", words[2]])
    assert cut[0] == full[0][: full[0].find(words[2])]
    for whole, part in zip(full, cut, strict=True):
        assert whole.startswith(part)
        assert words[2] not in part


def test_max_new_tokens_and_the_end_token_end_a_text(llama: dict[str, Any]) -> None:
    model, tokenizer, prompts = llama["model"], llama["tokenizer"], llama["prompts"]
    short = generate_batch(model, tokenizer, prompts, max_new_tokens=3)
    for text, ids in zip(short, prompts, strict=True):
        tokens, _ = greedy(model, ids, 3)
        assert text == tokenizer.decode(tokens, skip_special_tokens=True)
    tokens, _ = greedy(model, prompts[0], 12)
    end = next(t for t in tokens[2:] if t not in tokens[:2])  # its first time is the end
    config = model.generation_config
    kept = config.eos_token_id
    config.eos_token_id = end
    try:
        ended = generate_batch(model, tokenizer, prompts[:1], max_new_tokens=12)
    finally:
        config.eos_token_id = kept
    assert ended == [tokenizer.decode(tokens[: tokens.index(end)], skip_special_tokens=True)]


def test_the_model_is_left_in_the_mode_it_was_in(llama: dict[str, Any]) -> None:
    model, tokenizer, prompts = llama["model"], llama["tokenizer"], llama["prompts"]
    model.train()
    try:
        texts = generate_batch(model, tokenizer, prompts, max_new_tokens=4)
        assert model.training
    finally:
        model.eval()
    assert texts == generate_batch(model, tokenizer, prompts, max_new_tokens=4)


@pytest.mark.parametrize(
    ("change", "needles"),
    [
        ({"max_new_tokens": 0}, ["max_new_tokens", "positive"]),
        ({"batch_size": 0}, ["batch_size"]),
        ({"seed": -1}, ["seed"]),
        ({"temperature": -0.5}, ["temperature", ">= 0"]),
        ({"temperature": float("nan")}, ["temperature"]),
        ({"temperature": float("inf")}, ["temperature"]),
        ({"top_p": 0.0}, ["top_p", "(0, 1]"]),
        ({"top_p": 1.5}, ["top_p"]),
        ({"stop": [""]}, ["stop", "non-empty"]),
        ({"stop": "###"}, ["stop", "list"]),
        ({"prompts": [[5, 6], []]}, ["prompt 1", "no tokens"]),
        ({"prompts": [[5, 10**6]]}, ["prompt 0", "1000000", "vocabulary"]),
        ({"prompts": [[5, -1]]}, ["prompt 0", "-1", "vocabulary"]),
        ({"prompts": [[5] * 2040]}, ["prompt 0", "2040", "window of 2048"]),
    ],
)
def test_bad_arguments_fail_in_one_line(
    llama: dict[str, Any], change: dict[str, Any], needles: list[str]
) -> None:
    arguments: dict[str, Any] = {"prompts": llama["prompts"], "max_new_tokens": 12, **change}
    with pytest.raises(AdaptlabError) as caught:
        generate_batch(llama["model"], llama["tokenizer"], **arguments)
    message = str(caught.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message


def test_a_model_that_cannot_generate_is_refused(llama: dict[str, Any]) -> None:
    classifier = tiny_model("llama")
    with pytest.raises(AdaptlabError, match="LlamaForSequenceClassification .* causal LM"):
        generate_batch(classifier, llama["tokenizer"], [[5, 6]], max_new_tokens=2)


def test_a_failing_forward_is_raised(llama: dict[str, Any]) -> None:
    model = llama["model"]
    layer = model.model.layers[0]

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("out of memory")

    handle = layer.register_forward_pre_hook(broken, with_kwargs=True)
    try:
        with pytest.raises(RuntimeError, match="out of memory"):
            generate_batch(model, llama["tokenizer"], llama["prompts"], max_new_tokens=3)
    finally:
        handle.remove()

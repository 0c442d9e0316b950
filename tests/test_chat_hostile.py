"""Chats a tester threw at `adaptlab train --task chat`, `predict` and `eval`: a chat of 10,000
turns cut to a short window costs the renderings of what is kept, with the masks of an uncut
encoding; a template that drops what the assistant says, a chat opened by the assistant and a
broken template are each one line saying what is wrong and where the template came from, with
every input file left as it was."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_cases import refused, run_cli, unchanged
from generative_helpers import write_chats

import adaptlab
from adaptlab.data.chat_render import ChatRenderer
from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.data.generative import Conversation, Turn
from adaptlab.data.generative_encoding import EncodedExample, GenerativeEncoder
from adaptlab.models.loading import load_model, load_tokenizer

TRAIN = ["train", "--method", "lora", "--epochs", "1", "--batch-size", "8", "--seed", "0"]
CHAT = ["--task", "chat", "--max-new-tokens", "3", "--no-progress"]
BROKEN = "{{ raise_exception('this template is broken') }}"
ROLE_AND_END_ONLY = (
    "{% for m in messages %}{% if m.role == 'assistant' %}<assistant></assistant>"
    "{% else %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
"""Writes the assistant's role and end marker, never its words."""
ASSISTANT_AS_NOTHING = (
    "{% for m in messages %}{% if m.role != 'assistant' %}{{ m.content }} {% endif %}{% endfor %}"
)


@pytest.fixture()
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_chats(tmp_path / "chats.jsonl", 30)
    return tmp_path


@pytest.fixture()
def renders(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many times a chat template renders (one count per rendering)."""
    counted: list[int] = []
    render = ChatRenderer.text

    def counting(self: ChatRenderer, turns: Any, *, opened: bool = False) -> str:
        counted.append(1)
        return render(self, turns, opened=opened)

    monkeypatch.setattr(ChatRenderer, "text", counting)
    yield counted


def long_chat(turns: int) -> Conversation:
    """A system message, then `turns` user and assistant messages (their numbers repeat every
    ten turns, so two chats whose lengths differ by tens end alike)."""
    said = [
        Turn("assistant", f"answer {i % 10}") if i % 2 else Turn("user", f"question {i % 10}")
        for i in range(turns)
    ]
    return Conversation((Turn("system", "Be brief."), *said))


def as_messages(chat: Conversation) -> dict[str, Any]:
    return {"messages": [{"role": t.role, "content": t.content} for t in chat.turns]}


def test_a_cut_chat_keeps_the_tokens_and_masks_of_its_uncut_encoding(decoder: str) -> None:
    tokenizer, chat = load_tokenizer(decoder), long_chat(30)
    full = GenerativeEncoder(tokenizer, 512).encode(chat)
    assert full is not None and len(full.input_ids) < 512
    last_answer = max(i for i, label in enumerate(full.labels) if label == IGNORE_INDEX) + 1
    for length in range(2, len(full.input_ids) + 1):
        cut = GenerativeEncoder(tokenizer, length).encode(chat)
        if len(full.input_ids) - length >= last_answer:
            assert cut is None, length
        else:
            assert cut == EncodedExample(full.input_ids[-length:], full.labels[-length:]), length


def test_a_long_chat_renders_as_often_as_a_short_one_when_cut_alike(
    decoder: str, renders: list[int]
) -> None:
    tokenizer, counts = load_tokenizer(decoder), []
    for turns in (1_000, 10_000):
        encoder = GenerativeEncoder(tokenizer, 64)
        chat = long_chat(turns)
        encoded = encoder.encode(chat)
        assert encoded is not None and len(encoded.input_ids) == 64
        assert len(encoder.prompt_ids(chat)) == 63
        counts.append(len(renders))
        renders.clear()
    assert counts[0] == counts[1] < 40  # before: two per assistant turn (1,000 and 10,000)


def test_a_chat_of_ten_thousand_turns_trains_with_a_window_of_64(
    decoder: str, work: Path, renders: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    data = work / "data"
    data.mkdir()
    write_chats(data / "train.jsonl", 15)
    with (data / "train.jsonl").open("a") as file:
        file.write(json.dumps(as_messages(long_chat(10_000))) + "\n")
    write_chats(data / "dev.jsonl", 4)
    write_chats(data / "test.jsonl", 4)
    with unchanged(data):
        code, _, err = run_cli(
            [*TRAIN, "--model", decoder, "--data", "data", *CHAT, "--max-length", "64",
             "--out", "run"],
            capsys,
        )  # fmt: skip
    assert code == 0, err
    result = json.loads((work / "run" / "metrics.json").read_text())
    assert result["data"]["sizes"] == {"train": 16, "dev": 4, "test": 4}
    assert result["data"]["dropped"] == {"train": 0, "dev": 0, "test": 0}
    assert len(renders) < 300  # 5,000 assistant turns: at least 10,000 once


@pytest.mark.parametrize(
    "template", [ROLE_AND_END_ONLY, ASSISTANT_AS_NOTHING], ids=["role-and-end", "nothing"]
)
def test_a_template_that_drops_what_the_assistant_says_is_refused(
    template: str, decoder: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "t.jinja").write_text(template)
    with unchanged(work):
        refused(
            [*TRAIN, "--model", decoder, "--data", "chats.jsonl", *CHAT,
             "--chat-template", "t.jinja", "--out", "run"],
            capsys,
            f"the chat template from chat template file {work / 't.jinja'} does not write "
            "what the assistant says",
            "learn empty answers",
            "--chat-template FILE",
        )  # fmt: skip


def test_a_chat_opened_by_the_assistant_says_so(
    decoder: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    opened = long_chat(4).turns[2:]  # assistant, user, assistant: no system message
    with (work / "chats.jsonl").open("a") as file:
        file.write(json.dumps(as_messages(Conversation(opened))) + "\n")
    with unchanged(work):
        line = refused(
            [*TRAIN, "--model", decoder, "--data", "chats.jsonl", *CHAT, "--out", "run"],
            capsys,
            "chats.jsonl line 31: message 1 is assistant as the chat's first message",
            "starting with user",
        )
    assert "after system" not in line


def test_a_broken_template_names_the_file_or_tokenizer_it_came_from(
    decoder: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "broken.jinja").write_text(BROKEN)
    shutil.copytree(decoder, work / "model")
    tokenizer = load_tokenizer(str(work / "model"))
    tokenizer.chat_template = BROKEN
    tokenizer.save_pretrained(work / "model")
    given = [*TRAIN, "--data", "chats.jsonl", *CHAT, "--out", "run"]
    with unchanged(work):
        refused(
            [*given, "--model", decoder, "--chat-template", "broken.jinja"],
            capsys,
            f"the chat template from chat template file {work / 'broken.jinja'} cannot render "
            "a conversation ('this template is broken')",
        )
        refused(
            [*given, "--model", "model"],
            capsys,
            "the chat template of tokenizer model cannot render a conversation",
            "this template is broken",
        )


@pytest.fixture()
def broken_adapter(decoder: str, work: Path) -> Path:
    """A chat adapter whose manifest keeps a template that cannot render."""
    model = load_model(decoder, "causal_lm").model
    adaptlab.add_adapter(model, "default", "lora", seed=0, train_head=False)
    folder = work / "adapter"
    adaptlab.save_adapter(
        model, folder, base_model_id=decoder, task="chat", label_names=[], chat_template=BROKEN
    )
    (work / "prompts.txt").write_text("hello\nhow are you?\n")
    return folder


@pytest.mark.parametrize(
    "command",
    [
        ["predict", "--input", "prompts.txt"],
        ["predict", "--input", "chats.jsonl"],
        ["eval", "--data", "chats.jsonl"],
    ],
    ids=["predict-lines", "predict-chats", "eval"],
)
def test_a_broken_template_from_the_manifest_is_named_as_the_manifests(
    command: list[str],
    decoder: str,
    broken_adapter: Path,
    work: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    given = [
        *command,
        "--adapter",
        str(broken_adapter),
        "--model",
        decoder,
        "--max-new-tokens",
        "2",
    ]
    with unchanged(work):
        refused(
            given,
            capsys,
            f"the chat template from the manifest of adapter {broken_adapter} cannot render a "
            "conversation",
            "this template is broken",
            "; the adapter was saved with a broken template: retrain it",
        )
    (work / "good.jinja").write_text("{% for m in messages %}{{ m.content }}\n{% endfor %}")
    code, _, err = run_cli([*given, "--chat-template", "good.jinja"], capsys)
    assert code == 0, err

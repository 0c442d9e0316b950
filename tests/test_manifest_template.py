"""A chat template kept in an adapter's manifest is named by the adapter's folder wherever it
renders (`eval` of a preference or reward adapter, `analyze`'s data), since several adapters
may be in play; and each template refusal's advice fits where the template came from: a file
is fixed or replaced, an adapter's is retrained, a tokenizer's is replaced by a file. The
`predict` and `eval` cases of chat adapters are in `test_template_bounds.py`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_cases import refused, unchanged
from generative_helpers import write_chats

import adaptlab
from adaptlab.analysis.target import load_target
from adaptlab.data.chat_render import ChatRenderer, ChatTemplate, kept_template
from adaptlab.data.generative import Turn
from adaptlab.errors import ConfigError
from adaptlab.models.loading import load_model, load_tokenizer

UNCLOSED = "{% for m in messages %}{{ m['content'] }}"
"""A loop never closed: Jinja cannot compile it."""
TURNS = (Turn("user", "hello there"), Turn("assistant", "hi"))
NEEDED = "renders system, user and assistant messages"


@pytest.fixture()
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    user = [{"role": "user", "content": "is 3 a number ?"}]
    rows = [
        {
            "prompt": user,
            "chosen": [{"role": "assistant", "content": "yes"}],
            "rejected": [{"role": "assistant", "content": "no"}],
        }
    ] * 12
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return tmp_path


def saved(decoder: str, folder: Path, task: str, template: str) -> Path:
    """An adapter of `task` saved in `folder` whose manifest keeps chat template `template`."""
    reward = task == "reward"
    model = load_model(decoder, "regression" if reward else "causal_lm").model
    adaptlab.add_adapter(model, "default", "lora", seed=0, train_head=reward)
    adaptlab.save_adapter(
        model, folder, base_model_id=decoder, task=task, label_names=[], chat_template=template
    )
    return folder


def refusal(renderer: ChatRenderer) -> str:
    with pytest.raises(ConfigError) as raised:
        renderer.text(TURNS)
    return str(raised.value)


def test_the_advice_fits_where_the_template_came_from(decoder: str, tmp_path: Path) -> None:
    tokenizer = load_tokenizer(decoder)
    file = ChatTemplate.from_file(tmp_path / "t.jinja", UNCLOSED)
    kept = kept_template({"chat_template": UNCLOSED}, tmp_path / "qa-chat")
    assert kept == ChatTemplate.from_manifest(UNCLOSED, tmp_path / "qa-chat")
    assert kept_template({"chat_template": None}, tmp_path / "qa-chat") is None
    lines = {
        name: refusal(ChatRenderer(tokenizer, template, window=64))
        for name, template in [
            ("file", file),
            ("manifest", kept),
            ("passed", ChatTemplate(UNCLOSED)),
        ]
    }
    tokenizer.chat_template = UNCLOSED
    lines["tokenizer"] = refusal(ChatRenderer(tokenizer, None, window=64))
    origins = {
        "file": f"from chat template file {tmp_path / 't.jinja'}",
        "manifest": f"from the manifest of adapter {tmp_path / 'qa-chat'}",
        "passed": "passed as chat_template",
        "tokenizer": f"of tokenizer {decoder}",
    }
    advice = {
        "file": f"fix the file or pass another --chat-template FILE, one that {NEEDED}",
        "manifest": f"the adapter was saved with a broken template: retrain it with one that "
        f"{NEEDED}, or pass --chat-template FILE where the command takes one",
        "passed": f"pass a chat template that {NEEDED}",
        "tokenizer": f"pass --chat-template FILE with one that {NEEDED}",
    }
    for name, line in lines.items():
        assert line.startswith(f"the chat template {origins[name]} cannot render a conversation")
        assert line.endswith(f"); {advice[name]}"), line


@pytest.mark.parametrize("task", ["dpo", "reward"])
def test_eval_of_a_preference_adapter_names_the_adapter_of_a_broken_template(
    task: str, decoder: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = saved(decoder, work / f"qa-{task}", task, UNCLOSED)
    given = ["eval", "--adapter", str(folder), "--model", decoder, "--data", "pairs.jsonl"]
    with unchanged(work):
        refused(
            [*given, "--max-length", "32"],
            capsys,
            f"the chat template from the manifest of adapter {folder} cannot render",
            "; the adapter was saved with a broken template: retrain it",
        )


def test_analysis_data_names_the_adapter_of_a_broken_template(decoder: str, work: Path) -> None:
    folder = saved(decoder, work / "qa-sft", "chat", UNCLOSED)
    write_chats(work / "chats.jsonl", 12)
    named = re.escape(f"the chat template from the manifest of adapter {folder} cannot render")
    with pytest.raises(ConfigError, match=f"^{named}"):
        load_target(folder, "chats.jsonl", model=decoder)

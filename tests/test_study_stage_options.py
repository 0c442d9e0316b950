"""A study's sequence stages and data entries are checked when the spec loads: a chat template
file read from the spec's folder, and a stage option its sequence's objective does not read,
are refused in one line naming the spec file, line and entry, before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_cases import refused, unchanged
from generative_helpers import write_chats, write_pairs
from serve_helpers import CHAT_TEMPLATE

from adaptlab.errors import ConfigError
from adaptlab.study.planner import plan_study
from adaptlab.study.spec import StudySpec, load_spec
from adaptlab.study.spec_sequences import stage_run_options

HEAD = "name: s\nmodels: [smollm2-135m]\nmethods: [lora]\n"


def sequence(objective: str, *stages: str) -> str:
    lines = "".join(f"  - {stage}\n" for stage in stages)
    return f"{HEAD}objective: {objective}\nstrategies: [sequential]\nsequence:\n{lines}"


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """Pairs, chats, documents and a chat template beside the spec; an empty template."""
    write_pairs(tmp_path / "pairs.jsonl", 20)
    write_chats(tmp_path / "chats.jsonl", 20)
    write_chats(tmp_path / "more-chats.jsonl", 20)
    (tmp_path / "docs.txt").write_text("one document\nanother document\n")
    (tmp_path / "chat.jinja").write_text(CHAT_TEMPLATE)
    (tmp_path / "empty.jinja").write_text("  \n")
    return tmp_path


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (
            sequence(
                "chat",
                "chats.jsonl: {task: chat, chat_template: missing.jinja}",
                "more-chats.jsonl",
            ),
            "line 7, sequence[0]: chats.jsonl: chat template {folder}/missing.jinja is not a file; "
            "pass a Jinja template file",
        ),
        (
            sequence(
                "chat", "chats.jsonl", "more-chats.jsonl: {task: chat, chat_template: empty.jinja}"
            ),
            "line 8, sequence[1]: more-chats.jsonl: chat template {folder}/empty.jinja is empty",
        ),
        (
            sequence("chat", "chats.jsonl: {task: chat, chat_template: .}"),
            "line 7, sequence[0]: chats.jsonl: chat template {folder} is not a file; pass a "
            "Jinja template file",
        ),
        (
            sequence("sft", "pairs.jsonl: {task: sft, chat_template: chat.jinja}"),
            "line 7, sequence[0]: pairs.jsonl: --chat-template is for chat, dpo, simpo, orpo, "
            "reward, kto and grpo runs; this one is an sft run",
        ),
        (
            sequence("sft", "pairs.jsonl: {label_column: stars}"),
            "line 7, sequence: stage pairs.jsonl: --label-column is for classification "
            "sequences; this one is an sft sequence",
        ),
        (
            sequence("chat", "chats.jsonl: {text_column: body}"),
            "line 7, sequence: stage chats.jsonl: --text-column is for classification and "
            "causal-lm sequences; this one is a chat sequence",
        ),
        (
            sequence("causal-lm", "docs.txt: {split: chronological}"),
            "line 7, sequence: stage docs.txt: --split is for classification sequences; this "
            "one is a causal-lm sequence",
        ),
        (
            f"{HEAD}data: [{{chats.jsonl: {{task: chat, chat_template: missing.jinja}}}}]\n",
            "line 4, data[0]: chats.jsonl: chat template {folder}/missing.jinja is not a file; "
            "pass a Jinja template file",
        ),
    ],
    ids=[
        "missing-template",
        "empty-template",
        "folder-template",
        "sft-template",
        "sft-label-column",
        "chat-text-column",
        "causal-lm-split",
        "data-entry-template",
    ],
)  # fmt: skip
def test_study_run_refuses_a_bad_stage_when_the_spec_loads(
    folder: Path, capsys: pytest.CaptureFixture[str], body: str, needle: str
) -> None:
    spec = folder / "s.yaml"
    spec.write_text(body)
    with unchanged(folder):
        line = refused(["study", "run", str(spec)], capsys)
    assert line == f"error: {spec} {needle.format(folder=folder.resolve())}"
    assert not (folder / "s.db").exists()


def test_a_stage_template_is_read_from_the_spec_folder_wherever_the_study_runs(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (folder / "sub").mkdir()
    spec = folder / "sub" / "s.yaml"
    (folder / "sub" / "chat.jinja").write_text(CHAT_TEMPLATE)
    spec.write_text(sequence("chat", "chats.jsonl: {task: chat, chat_template: chat.jinja}"))
    (folder / "chat.jinja").unlink()  # none where the study runs
    monkeypatch.chdir(folder)
    loaded = load_spec(spec.relative_to(folder))
    options = stage_run_options(loaded.sequence[0], "chat", spec.parent.resolve())
    assert options == {
        "task": "chat",
        "chat_template": str(folder.resolve() / "sub" / "chat.jinja"),
    }


def test_a_reward_entry_template_is_read_from_the_spec_folder(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (folder / "sub").mkdir()
    (folder / "sub" / "chat.jinja").write_text(CHAT_TEMPLATE)
    spec = folder / "sub" / "r.yaml"
    spec.write_text(
        f"{HEAD}data: [{{countries-qa-pairs: {{task: reward, chat_template: chat.jinja}}}}]\n"
    )
    (folder / "chat.jinja").unlink()  # none where the study runs
    monkeypatch.chdir(folder)
    (run,) = plan_study(load_spec(spec.relative_to(folder)), spec.parent.resolve())
    template = str(folder.resolve() / "sub" / "chat.jinja")
    assert run.spec.data_options == {"task": "reward", "chat_template": template}


def test_a_spec_validated_without_its_folder_refuses_a_bad_template_when_planned(
    folder: Path,
) -> None:
    data = {
        "name": "s",
        "models": ["smollm2-135m"],
        "methods": ["lora"],
        "data": [{"chats.jsonl": {"task": "chat", "chat_template": "missing.jinja"}}],
    }
    spec = StudySpec.model_validate(data)  # no folder to read it from yet
    with pytest.raises(ConfigError, match="missing.jinja is not a file"):
        plan_study(spec, folder)

"""`adaptlab analyze forgetting` on damaged or conflicting inputs: a probe text that is not
UTF-8 or holds no text, an adapter whose manifest names no task adaptlab knows,
`--harness-include` with no harness probe or naming no folder, a fact file whose templates a
causal LM cannot answer. Each is one `error:` line, exit 1, every input unchanged byte for byte
and nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_cases import refused, unchanged
from generative_helpers import tiny_decoder
from test_forgetting import text

from adaptlab.records.config import TrainConfig
from adaptlab.runs.run import RunSpec, execute


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A causal-LM LoRA run of a tiny decoder (one short epoch) and the decoder's folder."""
    root = tmp_path_factory.mktemp("hostile-forgetting")
    decoder = tiny_decoder(root)
    (root / "train.txt").write_text(text(12, 0))
    train = TrainConfig(epochs=1, batch_size=8, learning_rate=1e-2, max_length=16, seed=0)
    data = {"task": "causal-lm"}
    spec = RunSpec.build(decoder, str(root / "train.txt"), "lora", train=train, data_options=data)
    execute(spec, root / "run", progress=False)
    return root / "run", decoder


def forgetting(run: Path, decoder: str, *args: str) -> list[str]:
    base = ["analyze", "forgetting", "--adapter", str(run), "--model", decoder]
    return [*base, "--no-progress", "--limit", "2", "--window", "8", *args]


@pytest.mark.parametrize(
    ("content", "needles"),
    [
        (b"\xff\xfe caf\xe9\n\nmore", ("line 1 is not UTF-8 text", "re-save the file")),
        (b"", ("holds no text", "give a file of documents")),
        (b"\n\n   \n\n\t\n", ("holds no text", "give a file of documents")),
    ],
)
def test_a_probe_text_that_is_not_utf8_or_holds_no_text_is_one_line(
    lm_run: tuple[Path, str],
    content: bytes,
    needles: tuple[str, ...],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run, decoder = lm_run
    probe = tmp_path / "probe.txt"
    probe.write_bytes(content)
    with unchanged(tmp_path), unchanged(run):
        refused(forgetting(run, decoder, "--probe", f"text:{probe}"), capsys, *needles)


@pytest.mark.parametrize("task", ["missing", None, "nope"])
def test_a_manifest_naming_no_known_task_is_one_line(
    lm_run: tuple[Path, str],
    task: str | None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run, decoder = lm_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    manifest = copy / "adapter" / "manifest.json"
    data = json.loads(manifest.read_text())
    if task == "missing":
        del data["task"]
    else:
        data["task"] = task
    manifest.write_text(json.dumps(data))
    shown = repr(None if task == "missing" else task)
    with unchanged(tmp_path):
        refused(
            forgetting(copy, decoder, "--probe", "text:fairy-tales"), capsys,
            f"{copy} names no task adaptlab knows ({shown})", "need a causal-lm, sft or chat run",
        )  # fmt: skip


def test_a_harness_include_no_probe_reads_or_that_is_no_folder_is_one_line(
    lm_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, decoder = lm_run
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    not_a_folder = tmp_path / "task.yaml"
    not_a_folder.write_text("task: mine\n")
    with unchanged(tmp_path), unchanged(run):
        args = ["--probe", "text:fairy-tales", "--harness-include", str(tasks)]
        refused(
            forgetting(run, decoder, *args), capsys,
            f"--harness-include {tasks} is read by harness: probes only", "--probe harness:TASK",
        )  # fmt: skip
        for include in (not_a_folder, tmp_path / "nowhere"):
            args = ["--probe", "harness:mine", "--harness-include", str(include)]
            refused(
                forgetting(run, decoder, *args), capsys,
                f"--harness-include {include} is not a folder", "give the folder",
            )  # fmt: skip


def test_a_fact_template_a_causal_lm_cannot_answer_names_the_probe(
    lm_run: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, decoder = lm_run
    facts = tmp_path / "facts.json"
    templates = {"capital": ["The capital of [X] is [Y].", "[Y] is the capital of [X]."]}
    facts.write_text(
        json.dumps({"templates": templates, "facts": [["France", "capital", "Paris"]]})
    )
    with unchanged(tmp_path), unchanged(run):
        refused(
            forgetting(run, decoder, "--probe", f"facts:{facts}"), capsys,
            f"probe facts:{facts}: template '[Y] is the capital of [X].'", "[Y] must end it",
        )  # fmt: skip

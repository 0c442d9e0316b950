"""One rule across the command line: an option the chosen task, adapter, sequence objective or
command does not read is refused in one line naming it (never ignored), with nothing written
and every input file as it was; and the nonsense the rule's neighbours refuse (a classifier's
adapter stacked under a causal LM's, a stage given twice) and the messages that used to mislead
(a generative built-in read as labelled data)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest
from cli_cases import refused, run_cli, snapshot, unchanged, write_reviews
from generative_helpers import tiny_decoder, write_pairs

import adaptlab
from adaptlab.models.loading import load_model

TRAIN = ["train", "--method", "lora", "--epochs", "1", "--batch-size", "8", "--seed", "0"]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny decoder, its data, an sft run and a classifier run on it, and a seq2seq adapter
    of a tiny T5 (saved untrained: only its manifest is read before the refusals)."""
    from tiny_models import save_family

    root = tmp_path_factory.mktemp("options")
    decoder = tiny_decoder(root)
    pairs = write_pairs(root / "pairs.jsonl", 40)
    reviews = write_reviews(root / "reviews.csv")
    found: dict[str, Any] = {"root": root, "decoder": decoder, "pairs": pairs, "reviews": reviews}
    t5 = save_family(str(root / "t5"), "t5")
    model = load_model(t5, "seq2seq_lm", seed=0).model
    adaptlab.adapt(model, "lora")
    found["seq2seq"] = adaptlab.save_adapter(
        model, root / "seq2seq", base_model_id=t5, task="seq2seq", label_names=()
    )
    return found


@pytest.fixture(scope="module")
def runs(made: dict[str, Any]) -> dict[str, Path]:
    """An sft run and a single_label classifier run of the tiny decoder."""
    from adaptlab.cli.app import main

    root, decoder = made["root"], made["decoder"]
    common = [*TRAIN, "--model", decoder, "--no-progress"]
    for args in (
        ["--data", str(made["pairs"]), "--task", "sft", "--max-new-tokens", "2"],
        ["--data", str(made["reviews"])],
    ):
        name = "sft" if "sft" in args else "classifier"
        with pytest.raises(SystemExit) as done:
            main([*common, *args, "--out", str(root / name)])
            raise SystemExit(0)
        assert done.value.code in (0, None)
    return {"sft": root / "sft", "classifier": root / "classifier"}


@pytest.fixture()
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder holding a chat template, questions and the data files, each hashed
    before and after every refusal."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "template.jinja").write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    (tmp_path / "questions.txt").write_text("what is 2 plus 2 ?\n")
    write_pairs(tmp_path / "pairs.jsonl", 40)
    write_reviews(tmp_path / "reviews.csv")
    return tmp_path


class Refuse(Protocol):
    """`refused`, every file under the working folder and under `also` unchanged byte for
    byte; the line comes back."""

    def __call__(self, args: list[str], *needles: str, also: Sequence[Path] = ()) -> str: ...


@pytest.fixture()
def refuse(work: Path, capsys: pytest.CaptureFixture[str]) -> Refuse:
    """A refusal in the working folder that changes nothing there or under `also`."""

    def run(args: list[str], *needles: str, also: Sequence[Path] = ()) -> str:
        folders = [work, *also]
        before = [snapshot(folder) for folder in folders]
        line = refused(args, capsys, *needles)
        assert [snapshot(folder) for folder in folders] == before
        return line

    return run


# --- options a task or an adapter does not read -------------------------------------------


@pytest.mark.parametrize(
    ("adapter", "extra", "needle"),
    [
        ("sft", ["--data", "pairs.jsonl", "--task", "single_label"],
         "--task single_label is not this adapter's task: it is an sft adapter"),
        ("seq2seq", ["--data", "pairs.jsonl", "--task", "sft"],
         "--task sft is not this adapter's task: it is a seq2seq adapter"),
        ("sft", ["--data", "pairs.jsonl", "--chat-template", "template.jinja"],
         "--chat-template is for chat, dpo, simpo, orpo, reward, kto and grpo adapters; this one "
         "is an sft adapter"),
        ("sft", ["--data", "pairs.jsonl", "--text-column", "body"],
         "--text-column is for single_label, multi_label, token, regression, mlm and causal-lm "
         "adapters; this one is an sft adapter"),
        ("seq2seq", ["--data", "pairs.jsonl", "--train-on-prompt"],
         "--train-on-prompt is for sft and chat adapters; this one is a seq2seq adapter"),
        ("classifier", ["--data", "reviews.csv", "--max-new-tokens", "3"],
         "--max-new-tokens is for sft, chat, seq2seq, dpo, simpo, orpo, kto and grpo adapters; "
         "this one is a single_label adapter"),
        ("classifier", ["--data", "reviews.csv", "--prompt-column", "q"],
         "--prompt-column is for sft and seq2seq adapters; this one is a single_label adapter"),
    ],
)  # fmt: skip
def test_eval_refuses_what_the_adapter_does_not_read(
    made: dict[str, Any],
    runs: dict[str, Path],
    refuse: Refuse,
    adapter: str,
    extra: list[str],
    needle: str,
) -> None:
    folder = made["seq2seq"] if adapter == "seq2seq" else runs[adapter]
    args = ["eval", "--adapter", str(folder), *extra]
    refuse(args, needle, also=[folder])


def test_eval_of_a_base_alone_refuses_what_its_task_does_not_read(
    made: dict[str, Any], refuse: Refuse
) -> None:
    args = ["eval", "--model", made["decoder"], "--data", "pairs.jsonl", "--task", "sft"]
    args += ["--chat-template", "template.jinja"]
    needle = "--chat-template is for chat, dpo, simpo, orpo, reward, kto and grpo tasks; this one"
    refuse(args, f"{needle} is an sft")


@pytest.mark.parametrize("option", ["--pack", "--metric"])
def test_eval_offers_no_training_option(
    runs: dict[str, Path], work: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    args = ["eval", "--adapter", str(runs["sft"]), "--data", "pairs.jsonl", option]
    with unchanged(work), unchanged(runs["sft"]):
        code, _, err = run_cli([*args, "exact_match"] if option == "--metric" else args, capsys)
    assert code == 2 and f"No such option: {option}" in err


@pytest.mark.parametrize(
    ("adapter", "extra", "needle"),
    [
        ("sft", ["--input", "questions.txt", "--chat-template", "template.jinja"],
         "--chat-template is for chat, dpo, simpo, orpo, kto and grpo adapters; this one is an "
         "sft adapter"),
        ("classifier", ["--input", "questions.txt", "--max-new-tokens", "3"],
         "--max-new-tokens is for causal-lm, sft, chat, seq2seq, dpo, simpo, orpo, kto and grpo "
         "adapters; this one is a single_label adapter"),
        ("sft", ["--input", "questions.txt", "--prompt-column", "q"],
         "--prompt-column is for data-file inputs (.jsonl, .csv, .tsv); --input questions.txt "
         "is read a prompt a line"),
    ],
)  # fmt: skip
def test_predict_refuses_what_the_adapter_or_input_does_not_read(
    runs: dict[str, Path], refuse: Refuse, adapter: str, extra: list[str], needle: str
) -> None:
    args = ["predict", "--adapter", str(runs[adapter]), *extra]
    refuse(args, needle, also=[runs[adapter]])


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--data", "pairs.jsonl", "--task", "sft", "--chat-template", "template.jinja"],
         "--chat-template is for chat, dpo, simpo, orpo, reward, kto and grpo runs; this one is "
         "an sft run"),
        (["--data", "pairs.jsonl", "--task", "causal-lm", "--max-new-tokens", "3"],
         "--max-new-tokens is for sft, chat, seq2seq, dpo, simpo, orpo, kto and grpo runs; this "
         "one is a causal-lm run"),
        (["--data", "pairs.jsonl", "--task", "sft", "--label-column", "stars"],
         "--label-column is for single_label, multi_label, token and regression runs; this one "
         "is an sft run"),
        (["--data", "reviews.csv", "--pack"],
         "--pack is for causal-lm, sft and chat runs; this one is a labelled run (no --task)"),
        (["--data", "pairs.jsonl", "--task", "sft", "--frozen-cache", "memory"],
         "--frozen-cache is for runs of a labelled task (single_label, multi_label, token, "
         "regression); this one is an sft run"),
        (["--data", "reviews.csv", "--oversubscribe"], "--oversubscribe is for --nproc N above 1"),
    ],
)  # fmt: skip
def test_train_refuses_what_its_task_or_launch_does_not_read(
    made: dict[str, Any], work: Path, refuse: Refuse, extra: list[str], needle: str
) -> None:
    args = [*TRAIN, "--model", made["decoder"], *extra, "--out", "run"]
    refuse(args, needle)
    assert not (work / "run").exists()


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--objective", "sft", "--chat-template", "template.jinja"],
         "--chat-template is for chat sequences; this one is an sft sequence"),
        (["--objective", "causal-lm", "--max-new-tokens", "3"],
         "--max-new-tokens is for sft and chat sequences; this one is a causal-lm sequence"),
        (["--objective", "sft", "--stages", "pairs.jsonl,./pairs.jsonl"],
         "--stages names ./pairs.jsonl twice (as pairs.jsonl and ./pairs.jsonl)"),
        (["--stages", "reviews.csv,reviews.csv"], "--stages names reviews.csv twice"),
        (["--stages", "reviews.csv", "--single-stage"], "give two --stages or more"),
    ],
)  # fmt: skip
def test_sequence_refuses_what_its_objective_does_not_read_and_a_stage_twice(
    made: dict[str, Any], work: Path, refuse: Refuse, extra: list[str], needle: str
) -> None:
    stages = [] if "--stages" in extra else ["--stages", "pairs.jsonl,reviews.csv"]
    args = ["sequence", "--model", made["decoder"], *stages, *extra, "--out", "seq"]
    refuse(args, needle)
    assert not (work / "seq").exists()


def test_methods_refuses_a_head_size_without_a_model(capsys: pytest.CaptureFixture[str]) -> None:
    refused(["methods", "--num-labels", "3"], capsys, "--num-labels", "give --model")


def test_study_run_refuses_progress_bars_ray_does_not_show(work: Path, refuse: Refuse) -> None:
    (work / "study.yaml").write_text("name: s\n")  # refused before the spec is read
    args = ["study", "run", "study.yaml", "--executor", "ray", "--progress"]
    refuse(args, "--progress is for --executor local")


def test_a_builtins_own_columns_are_not_replaced(made: dict[str, Any], refuse: Refuse) -> None:
    args = [*TRAIN, "--model", made["decoder"], "--data", "rotten-tomatoes"]
    args += ["--text-column", "body", "--out", "run"]
    refuse(args, "built-in rotten-tomatoes reads its own columns")


# --- nonsense and misleading messages ----------------------------------------------------------


def test_a_classifiers_adapter_is_not_stacked_under_a_causal_lms(
    made: dict[str, Any], runs: dict[str, Path], work: Path, refuse: Refuse
) -> None:
    args = [*TRAIN, "--model", made["decoder"], "--data", "pairs.jsonl", "--task", "sft"]
    args += ["--stack", str(runs["classifier"]), "--out", "run"]
    needles = ("is a single_label adapter", "trained as a Llama")
    line = refuse(args, *needles, also=[runs["classifier"]])
    assert "this sft run trains a causal_lm model" in line
    assert "language adapters (mlm, causal-lm)" in line
    assert not (work / "run").exists()


def test_a_generative_builtin_read_as_labelled_data_names_the_task_that_learns_it(
    refuse: Refuse, tiny_model_dir: str
) -> None:
    args = [*TRAIN, "--model", tiny_model_dir, "--data", "countries-qa", "--out", "run"]
    refuse(args, "countries-qa is a built-in generative corpus", "--task sft")


def test_adapters_show_json_says_where_the_manifest_counts_are_false(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli_cases import copy_tree

    folder = copy_tree(runs["classifier"] / "adapter", tmp_path / "adapter")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["tensors"]["parameters"] += 1
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with unchanged(folder):
        code, out, err = run_cli(["adapters", "show", str(folder), "--json"], capsys)
    assert code == 0, err
    row = json.loads(out)[0]
    assert row["parameters"] == manifest["tensors"]["parameters"] - 1
    assert "the folder was edited or is damaged" in row["problem"]
    code, out, _ = run_cli(["adapters", "show", str(runs["classifier"]), "--json"], capsys)
    assert code == 0 and json.loads(out)[0]["problem"] is None

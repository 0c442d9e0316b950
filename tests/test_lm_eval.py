"""Scoring adapters with EleutherAI's lm-evaluation-harness (`adaptlab.integrations.lm_eval`,
`adaptlab eval --harness`), offline on local task files (tests/data/lm_eval: a two-choice
log-likelihood task on reviews and a short-answer generation task) and a tiny random Llama
with a word-level tokenizer.

A LoRA scores what lm-eval's own `hf` model scores on the same adapter exported to PEFT,
example by example; a Houlsby adapter, a Fuse and a Stack, which PEFT cannot represent, are
scored with the adapter running; the results are written in lm-eval's layout beside the run;
and every refusal (a classifier's adapter, an unknown task, a missing task folder, options
that do not go together, lm-eval not installed, an output folder that is not lm-eval's) is one
`error:` line with nothing written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from cli_cases import copy_tree, read_only, refused, run_cli, unchanged
from lm_eval_helpers import CAPITALS, DATA, REVIEWS, SUITE, TASKS, task_folder, word_llama

import adaptlab
from adaptlab import Fuse, Stack
from adaptlab.cli.app import main
from adaptlab.errors import ConfigError
from adaptlab.integrations.lm_eval import HarnessResults, evaluate
from adaptlab.methods.peft_format import export_peft
from adaptlab.models.loading import load_model

pytest.importorskip("lm_eval")

INCLUDE = "--harness-include"


def randomised(model: torch.nn.Module, name: str) -> None:
    """Trained-looking values for adapter `name` (LoRA's B and Houlsby's up-projection start
    at zero, where the adapter would change nothing)."""
    with torch.no_grad():
        for tensor in adaptlab.get_handle(model, name).tensors().values():
            tensor.add_(torch.randn_like(tensor) * 0.2)


def save(model: torch.nn.Module, folder: Path, base: str, name: str | None = None) -> Path:
    """The adapter saved as a causal-LM run saves it."""
    return adaptlab.save_adapter(
        model, folder, name=name, base_model_id=base, task="causal-lm", label_names=()
    )


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The tiny Llama, the task folder, and adapters on the Llama: a LoRA (and its PEFT
    export), a Houlsby adapter, a Fuse of a LoRA and a Pfeiffer adapter, and the LoRA stacked
    on the Pfeiffer adapter."""
    root = tmp_path_factory.mktemp("lm-eval")
    base = word_llama(root / "llama")
    found: dict[str, Any] = {"root": root, "base": base, "include": task_folder(root / "tasks")}
    for method in ("lora", "houlsby"):
        model = load_model(base, "causal_lm", seed=0).model
        adaptlab.add_adapter(model, method, method, train_head=False)
        randomised(model, method)
        found[method] = save(model, root / method, base)
        if method == "lora":
            found["peft"] = export_peft(model, root / "peft", base_model_id=base)
    model = load_model(base, "causal_lm", seed=0).model
    for seed, (name, method) in enumerate((("a", "lora"), ("b", "pfeiffer"))):
        adaptlab.add_adapter(model, name, method, train_head=False, seed=seed)
        randomised(model, name)
    adaptlab.add_fusion(model, Fuse("a", "b"), train_head=False)
    randomised(model, "fusion")
    found["fusion"] = save(model, root / "fusion", base, name="fusion")
    adaptlab.set_active(model, Stack("b", "a"))  # a language adapter under a task adapter
    found["stack"] = save(model, root / "stack", base, name="a")
    return found


def harness(setup: dict[str, Any], adapter: Path | None, **options: Any) -> HarnessResults:
    """`adapter` (None: the base alone) scored on both tasks, every example logged."""
    return evaluate(
        adapter, options.pop("tasks", TASKS), model=setup["base"], include=setup["include"],
        builtin_tasks=False, log_samples=True, **options,
    )  # fmt: skip


@pytest.fixture(scope="module")
def bare(setup: dict[str, Any]) -> dict[str, Any]:
    """The base model's results alone."""
    return harness(setup, None).results


def likelihoods(results: dict[str, Any]) -> dict[int, list[float]]:
    """Each review's log-likelihood of each choice, by example."""
    return {
        sample["doc_id"]: [resp[0][0] for resp in sample["resps"]]
        for sample in results["samples"][REVIEWS]
    }


def largest_change(scores: dict[int, list[float]], base: dict[int, list[float]]) -> float:
    """How far any log-likelihood is from the base model's."""
    return max(abs(a - b) for doc in scores for a, b in zip(scores[doc], base[doc], strict=True))


def answers(results: dict[str, Any]) -> dict[int, str]:
    """Each question's generated answer, by example."""
    return {s["doc_id"]: s["filtered_resps"][0] for s in results["samples"][CAPITALS]}


def test_a_lora_scores_what_lm_evals_own_hf_model_scores_on_its_peft_export(
    setup: dict[str, Any], bare: dict[str, Any], tmp_path: Path
) -> None:
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    ours = harness(setup, setup["lora"], out=tmp_path).results
    theirs = simple_evaluate(
        model=HFLM(pretrained=setup["base"], peft=str(setup["peft"]), batch_size=8, device="cpu"),
        tasks=TASKS,
        task_manager=TaskManager(include_path=str(setup["include"]), include_defaults=False),
        log_samples=True,
    )
    scores = ((REVIEWS, "acc,none"), (REVIEWS, "acc_norm,none"), (CAPITALS, "exact_match,none"))
    for task, metric in scores:
        assert ours["results"][task][metric] == pytest.approx(
            theirs["results"][task][metric], abs=1e-4
        )
    mine, reference = likelihoods(ours), likelihoods(theirs)
    assert len(mine) == 12 and mine.keys() == reference.keys()
    for doc in mine:
        assert mine[doc] == pytest.approx(reference[doc], abs=1e-4)
    assert answers(ours) == answers(theirs)
    assert largest_change(mine, likelihoods(bare)) > 1e-3


@pytest.mark.parametrize("adapter", ["houlsby", "fusion", "stack"])
def test_adapters_peft_cannot_represent_are_scored_with_the_adapter_running(
    setup: dict[str, Any], bare: dict[str, Any], adapter: str, tmp_path: Path
) -> None:
    results = harness(setup, setup[adapter], out=tmp_path).results
    assert 0 <= results["results"][REVIEWS]["acc,none"] <= 1
    assert 0 <= results["results"][CAPITALS]["exact_match,none"] <= 1
    mine = likelihoods(results)
    assert len(mine) == 12
    assert largest_change(mine, likelihoods(bare)) > 1e-3


def test_results_are_written_in_lm_evals_layout_in_the_adapter_folder(
    setup: dict[str, Any], tmp_path: Path
) -> None:
    adapter = copy_tree(setup["lora"], tmp_path / "lora")
    first = harness(setup, adapter, limit=4, num_fewshot=1)
    assert first.written is not None and first.written.parent == adapter / "lm_eval"
    written = json.loads(first.written.read_text())
    for key in ("results", "configs", "versions", "n-shot", "higher_is_better", "n-samples"):
        assert key in written
    assert "samples" not in written and "samples" in first.results
    assert written["results"][REVIEWS]["acc,none"] == first.results["results"][REVIEWS]["acc,none"]
    assert written["n-shot"] == {REVIEWS: 1, CAPITALS: 1}
    assert written["n-samples"][REVIEWS] == {"original": 12, "effective": 4}
    assert written["config"]["model_args"]["adapter"] == str(adapter)
    assert set(written["task_hashes"]) == set(TASKS) and written["model_name"] == setup["base"]
    assert written["configs"][CAPITALS]["generation_kwargs"]["until"] == ["\n"]
    before = first.written.read_bytes()
    second = harness(setup, adapter, tasks=[REVIEWS], limit=2)
    assert second.written is not None and second.written != first.written
    assert first.written.read_bytes() == before
    assert sorted(p.name for p in (adapter / "lm_eval").iterdir()) == sorted(
        [first.written.name, second.written.name]
    )


def test_the_base_alone_is_written_only_where_asked(setup: dict[str, Any], tmp_path: Path) -> None:
    assert harness(setup, None, tasks=[REVIEWS], limit=2).written is None
    out = tmp_path / "base-results"
    scored = harness(setup, None, tasks=[REVIEWS], limit=2, out=out)
    assert scored.written is not None and scored.written.parent == out


def test_a_group_of_tasks_is_scored_as_lm_eval_groups_it(setup: dict[str, Any]) -> None:
    results = harness(setup, None, tasks=[SUITE], limit=2).results
    assert {REVIEWS, CAPITALS} <= set(results["results"])
    assert sorted(results["group_subtasks"][SUITE]) == sorted(TASKS)


def test_a_task_whose_data_cannot_be_read_is_one_line(
    setup: dict[str, Any], tmp_path: Path
) -> None:
    folder = tmp_path / "tasks"
    folder.mkdir()
    config = yaml.safe_load((setup["include"] / "reviews.yaml").read_text())
    config["task"] = "broken_reviews"
    config["dataset_kwargs"]["data_files"] = {"test": str(tmp_path / "missing.jsonl")}
    (folder / "broken.yaml").write_text(yaml.safe_dump(config))
    with unchanged(tmp_path), pytest.raises(ConfigError) as error:
        evaluate(
            None, "broken_reviews", model=setup["base"], include=folder, builtin_tasks=False,
            out=tmp_path / "out",
        )  # fmt: skip
    message = str(error.value)
    assert "lm-eval could not load task 'broken_reviews'" in message and "\n" not in message


# --- the command line -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run(setup: dict[str, Any]) -> Path:
    """A LoRA run trained by `adaptlab train --task sft` on the questions of the QA task."""
    root: Path = setup["root"]
    rows = [json.loads(line) for line in (DATA / "capitals.jsonl").read_text().splitlines()]
    pairs = root / "pairs.jsonl"
    pairs.write_text(
        "".join(
            json.dumps({"prompt": f"Q: {row['question']}\nA:", "completion": f" {row['answer']}"})
            + "\n"
            for row in rows * 2
        )
    )
    out = root / "run"
    with pytest.raises(SystemExit) as done:
        main(
            ["train", "--method", "lora", "--task", "sft", "--data", str(pairs), "--model",
             setup["base"], "--epochs", "1", "--batch-size", "8", "--learning-rate", "1e-2",
             "--max-new-tokens", "2", "--out", str(out)]
        )  # fmt: skip
    assert done.value.code in (0, None)
    return out


def cli_args(setup: dict[str, Any], adapter: Path, *extra: str) -> list[str]:
    return ["eval", "--adapter", str(adapter), "--model", setup["base"], *extra]


def test_eval_harness_writes_lm_evals_json_beside_the_run_and_prints_a_table(
    setup: dict[str, Any], run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--harness", REVIEWS, "--harness-include", str(setup["include"]), "--limit", "5"]
    code, out, err = run_cli(cli_args(setup, run, *args), capsys)
    assert code == 0, err
    written = sorted((run / "lm_eval").iterdir())
    assert len(written) == 1 and written[0].name.startswith("results_")
    results = json.loads(written[0].read_text())
    assert results["n-samples"][REVIEWS]["effective"] == 5
    acc = results["results"][REVIEWS]["acc,none"]
    assert f"{acc:.4f}" in out and "acc_norm" in out and REVIEWS in out
    assert f"written to {written[0]}" in " ".join(out.split())


def test_eval_harness_scores_a_base_alone_and_prints_json(
    setup: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "base"
    args = ["eval", "--model", setup["base"], "--harness", REVIEWS, INCLUDE, str(setup["include"])]
    code, printed, err = run_cli(
        [*args, "--limit", "3", "--harness-out", str(out), "--json"], capsys
    )
    assert code == 0, err
    (written,) = out.iterdir()
    scores = json.loads(printed)
    assert scores["written"] == str(written)
    assert scores["results"] == json.loads(written.read_text())["results"]
    assert scores["results"][REVIEWS]["sample_len"] == 3


def test_eval_harness_refuses_an_unknown_task_naming_it_and_how_to_list_tasks(
    setup: dict[str, Any], run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--harness", f"{REVIEWS},adaptlab_reveiws", INCLUDE, str(setup["include"])]
    with unchanged(run):
        refused(cli_args(setup, run, *args), capsys, "'adaptlab_reveiws'", "lm-eval ls tasks")


def test_eval_harness_says_why_a_task_of_a_yaml_that_does_not_parse_is_unknown(
    setup: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = copy_tree(setup["include"], tmp_path / "tasks")
    broken = folder / "broken.yaml"
    broken.write_text("task: adaptlab_broken\ndataset_path: json\n  output_type: multiple_choice\n")
    adapter = copy_tree(setup["lora"], tmp_path / "adapter")
    args = ["--harness", "adaptlab_broken", INCLUDE, str(folder)]
    with unchanged(tmp_path):
        line = refused(
            cli_args(setup, adapter, *args),
            capsys,
            "lm-eval has no task 'adaptlab_broken'",
            f"{broken} line 3: mapping values are not allowed here",
        )
    assert "ls tasks" not in line


@pytest.fixture(scope="module")
def classifier(tiny_model_dir: str, setup: dict[str, Any]) -> Path:
    """A classifier's LoRA (a sequence-classification head) on the tiny BERT."""
    model = load_model(tiny_model_dir, "single_label", label_names=["no", "yes"], seed=0).model
    adaptlab.adapt(model, "lora")
    return adaptlab.save_adapter(
        model, setup["root"] / "classifier", base_model_id=tiny_model_dir, task="single_label"
    )


def test_a_classifiers_adapter_is_refused_saying_why(
    setup: dict[str, Any], classifier: Path, tiny_model_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["eval", "--adapter", str(classifier), "--model", tiny_model_dir, "--harness", REVIEWS]
    with unchanged(classifier):
        refused(args, capsys, "single_label adapter", "sequence-classification head")


def test_an_encoder_base_alone_is_refused(
    tiny_model_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    refused(["eval", "--model", tiny_model_dir, "--harness", REVIEWS], capsys, "an encoder")


@pytest.mark.parametrize(
    ("extra", "needles"),
    [
        (["--harness", REVIEWS, INCLUDE, "{tmp}/none"], ("--harness-include", "no such folder")),
        (["--harness", REVIEWS, INCLUDE, "{tmp}/file.txt"], ("is a file",)),
        (["--harness", " , "], ("at least one lm-eval task",)),
        (["--harness", f"{REVIEWS},{REVIEWS}"], ("more than once",)),
        (["--harness", REVIEWS, "--limit", "0"], ("--limit must be a positive integer",)),
        (["--harness", REVIEWS, "--num-fewshot", "-1"], ("--num-fewshot must be",)),
        (["--harness", REVIEWS, "--data", "rotten-tomatoes"], ("--data does not apply",)),
        (["--harness", REVIEWS, "--split", "dev"], ("--split does not apply",)),
        (["--harness", REVIEWS, "--max-length", "64"], ("--max-length does not apply",)),
        (["--harness", REVIEWS, "--max-new-tokens", "4"], ("--max-new-tokens does not apply",)),
        (["--num-fewshot", "2", "--data", "x.csv"], ("--num-fewshot is an option of --harness",)),
        (["--limit", "5", "--data", "x.csv"], ("--limit is an option of --harness",)),
        ([INCLUDE, "{tmp}", "--data", "x.csv"], ("--harness-include is an option of --harness",)),
        (["--harness-out", "{tmp}/o"], ("--harness-out is an option of --harness",)),
        ([], ("give --data",)),
        (["--harness", REVIEWS, "--harness-out", "{tmp}/file.txt"], ("is a file; give a folder",)),
        (["--harness", REVIEWS, "--harness-out", "{tmp}/other"], ("which adaptlab did not write",)),
        (["--harness", REVIEWS, "--harness-out", "{adapter}/out"], ("is inside the adapter",)),
        (["--harness", REVIEWS, "--harness-out", "{tmp}/link"], ("is a symbolic link",)),
    ],
)
def test_bad_harness_options_are_one_line_and_write_nothing(
    setup: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    needles: tuple[str, ...],
) -> None:
    adapter = copy_tree(setup["lora"], tmp_path / "adapter")
    (tmp_path / "file.txt").write_text("not a folder\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine\n")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    args = [a.format(tmp=tmp_path, adapter=adapter) for a in extra]
    with unchanged(tmp_path):
        refused(cli_args(setup, adapter, *args), capsys, *needles)


def test_a_run_folder_that_cannot_be_written_is_refused(
    setup: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    adapter = copy_tree(setup["lora"], tmp_path / "adapter")
    with read_only(adapter), unchanged(tmp_path):
        refused(cli_args(setup, adapter, "--harness", REVIEWS), capsys, "cannot write")


def test_neither_an_adapter_nor_a_model_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    refused(["eval", "--harness", REVIEWS], capsys, "give an adapter or run folder")


def test_without_lm_eval_installed_the_harness_says_how_to_install_it(
    setup: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    with unchanged(setup["lora"]):
        line = refused(cli_args(setup, setup["lora"], "--harness", REVIEWS), capsys)
    assert line == (
        "error: adaptlab eval --harness needs lm-evaluation-harness: pip install "
        "'adaptlab[harness]'"
    )


def test_the_eval_command_loads_without_lm_eval() -> None:
    import subprocess

    code = "import sys, adaptlab.cli.eval_cmd\nassert 'lm_eval' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], timeout=300).returncode == 0


def test_an_adapter_is_scored_on_a_quantised_base_too(setup: dict[str, Any]) -> None:
    pytest.importorskip("bitsandbytes")
    full = likelihoods(harness(setup, setup["lora"], tasks=[REVIEWS]).results)
    quantised = likelihoods(harness(setup, setup["lora"], tasks=[REVIEWS], quantize="int8").results)
    change = largest_change(quantised, full)
    assert 0 < change < 0.5  # int8 rounds the base's weights: close, not equal


def test_a_bad_quantisation_is_one_line(
    setup: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    args = cli_args(setup, setup["lora"], "--harness", REVIEWS, INCLUDE, str(setup["include"]))
    refused([*args, "--quantize", "nf3"], capsys, "--quantize must be one of nf4, int8")


def test_a_combined_adapter_is_scored_as_the_adapters_it_adds_up_to(
    setup: dict[str, Any], tmp_path: Path
) -> None:
    lora = setup["lora"]  # half of it and half of its copy, stacked by cat: the same update
    copy = copy_tree(lora, tmp_path / "copy")
    combined = adaptlab.combine_adapters(
        [lora, copy], tmp_path / "c", how="cat", names=["x", "y"], model=setup["base"]
    )
    alone = likelihoods(harness(setup, lora, tasks=[REVIEWS]).results)
    both = likelihoods(harness(setup, combined, tasks=[REVIEWS]).results)
    assert largest_change(both, alone) < 1e-4


def test_eval_scores_a_run_and_a_base_on_their_data_on_a_quantised_base(
    setup: dict[str, Any], run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("bitsandbytes")
    data = ["--data", str(setup["root"] / "pairs.jsonl"), "--task", "sft", "--json"]
    scores = {}
    for quantize in ([], ["--quantize", "int8"]):
        code, printed, err = run_cli(cli_args(setup, run, *data, *quantize), capsys)
        assert code == 0, err
        scores[bool(quantize)] = json.loads(printed)["perplexity"]
    assert scores[True] != scores[False]
    assert scores[True] == pytest.approx(scores[False], rel=0.1)  # int8 rounds, close
    base = ["eval", "--model", setup["base"], *data, "--quantize", "int8"]
    code, printed, err = run_cli(base, capsys)
    assert code == 0, err
    assert json.loads(printed)["perplexity"] > 1

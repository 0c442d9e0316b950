"""A cross-lingual study: language adapters trained by MLM as sources, a MAD-X method stacked on
one, every run scored zero-shot on another language's data with the language adapter swapped."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import pytest
from study_helpers import one_thread, write_spec
from tiny_models import save_tiny_bert

from adaptlab.data import load_dataset
from adaptlab.errors import ConfigError
from adaptlab.records.transfer import ZeroShotTarget
from adaptlab.report import write_report
from adaptlab.study.planner import RUN_REFERENCE, plan_study
from adaptlab.study.runner import run_study
from adaptlab.study.spec import load_spec
from adaptlab.study.store import load_records
from adaptlab.tasks.registry import LABELLED

MOODS = {"fresh": ["great", "lovely", "superb"], "rotten": ["dull", "awful", "boring"]}


def write_reviews(path: Path, rows: int, opener: str, labels: tuple[str, ...]) -> Path:
    rng = random.Random(rows)
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        for i in range(rows):
            label = labels[i % len(labels)]
            words = MOODS.get(label, ["so-so"])
            writer.writerow([f"{opener} {rng.choice(words)} film", label])
    return path


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return save_tiny_bert(str(tmp_path_factory.mktemp("tiny-bert")))


def crosslingual_spec(folder: Path, model: str, **keys: object) -> Path:
    rng = random.Random(0)
    for name, words in (("en", ["the", "a", "film", "was"]), ("sl", ["en", "film", "je", "bil"])):
        lines = [" ".join(rng.choice(words) for _ in range(8)) for _ in range(60)]
        (folder / f"{name}.txt").write_text("\n".join(lines))
    write_reviews(folder / "reviews.csv", 60, "a", ("fresh", "rotten"))
    write_reviews(folder / "reviews-sl.csv", 40, "en", ("rotten", "fresh"))
    mlm = {"epochs": 1, "method": "pfeiffer"}
    settings: dict[str, object] = {
        "name": "xling",
        "methods": ["bitfit", {"method": "pfeiffer", "stack": ["lang-en"], "label": "mad-x"}],
        "seeds": [0],
        "sources": [
            {"label": "lang-en", "data": {"en.txt": {"task": "mlm"}}, **mlm},
            {"label": "lang-sl", "data": {"sl.txt": {"task": "mlm"}}, **mlm},
        ],
        "zero_shot": [{"data": "reviews-sl.csv", "stack_swap": {"lang-en": "lang-sl"}}],
        **keys,
    }
    return write_spec(folder, model, "reviews.csv", **settings)


def test_the_plan_scores_every_run_zero_shot_and_swaps_only_stacked_ones(model, tmp_path):
    path = crosslingual_spec(tmp_path, model)
    runs = plan_study(load_spec(path), tmp_path)
    labels = [run.method_label for run in runs]
    assert labels == ["lang-en", "lang-sl", "bitfit", "mad-x"]
    sources = {run.method_label: run for run in runs[:2]}
    assert all(run.spec.data_options == {"task": "mlm"} for run in sources.values())
    assert all(not run.spec.zero_shot for run in sources.values())
    bitfit, madx = runs[2], runs[3]
    target = str(tmp_path / "reviews-sl.csv")
    assert bitfit.spec.zero_shot == (ZeroShotTarget(target),)
    lang_sl = f"{RUN_REFERENCE}{sources['lang-sl'].run_id}/lang-sl"
    assert madx.spec.zero_shot == (ZeroShotTarget(target, {}, (("lang-en", lang_sl),)),)
    assert set(madx.needs) == {sources["lang-en"].run_id, sources["lang-sl"].run_id}
    placed = madx.placed(tmp_path / "kept")
    swapped = placed.spec.zero_shot[0].stack_swap[0][1]
    assert swapped == str(tmp_path / "kept" / sources["lang-sl"].run_id / "lang-sl")


def test_a_swap_of_an_adapter_no_method_stacks_on_is_refused(model, tmp_path):
    path = crosslingual_spec(
        tmp_path, model, zero_shot=[{"data": "reviews-sl.csv", "stack_swap": {"lang-fr": "x"}}]
    )
    with pytest.raises(ConfigError, match="swaps 'lang-fr', which no method is stacked on"):
        plan_study(load_spec(path), tmp_path)


def test_the_study_runs_stores_zero_shot_scores_and_reports_them(model, tmp_path):
    sources = [  # English from the grid's own texts: the report keeps its masked-LM run apart
        {"label": "lang-en", "data": {"reviews.csv": {"task": "mlm"}}, "method": "pfeiffer"},
        {"label": "lang-sl", "data": {"sl.txt": {"task": "mlm"}}, "method": "pfeiffer"},
    ]
    path = crosslingual_spec(tmp_path, model, seeds=[0, 1], sources=sources)
    with one_thread():
        summary = run_study(path)
    assert not summary.failed
    ran = [(o.run.method_label, o.run.spec.train.seed) for o in summary.outcomes]
    assert ran[2:] == [("bitfit", 0), ("mad-x", 0), ("bitfit", 1), ("mad-x", 1)]  # seeds first
    stored = load_records(tmp_path / "xling.db")
    records = {r.method_label: r.result for r in stored}
    assert records["lang-en"].data.task == "mlm" and records["lang-en"].zero_shot is None
    test_split = load_dataset(str(tmp_path / "reviews-sl.csv"), LABELLED).splits["test"]
    for method in ("bitfit", "mad-x"):
        (score,) = records[method].zero_shot or ()
        assert score.name == "reviews-sl" and score.examples == len(test_split)
        assert set(score.metrics) >= {"accuracy", "macro_f1"}
    assert records["bitfit"].zero_shot[0].composition is None  # type: ignore[index]
    assert records["mad-x"].zero_shot[0].composition == "Stack('lang-sl', 'default')"  # type: ignore[index]
    html = write_report(stored, tmp_path / "xling.html", title="xling").read_text()
    assert "Cross-lingual transfer" in html and "reviews-sl" in html and "mad-x" in html
    assert "reviews (masked LM) · " in html  # the language adapter on the grid's own texts


def test_a_zero_shot_target_with_other_labels_fails_before_training(model, tmp_path):
    path = crosslingual_spec(tmp_path, model, methods=["bitfit"])
    write_reviews(tmp_path / "reviews-sl.csv", 40, "en", ("rotten", "fresh", "meh"))
    path = write_spec(
        tmp_path,
        model,
        "reviews.csv",
        name="labels",
        methods=["bitfit"],
        seeds=[0],
        zero_shot=["reviews-sl.csv"],
    )
    with one_thread():
        summary = run_study(path)
    (failed,) = summary.failed
    assert failed.error == (
        "reviews-sl has labels fresh, meh, rotten; reviews was trained on fresh, rotten: "
        "labels are matched by name and must be the same set"
    )


def test_the_example_study_plans_the_whole_experiment():
    examples = Path(__file__).resolve().parents[1] / "examples"
    runs = plan_study(load_spec(examples / "xling-e5.yaml"), examples)
    sources, grid = runs[:2], runs[2:]
    assert [run.method_label for run in sources] == ["lang-en", "lang-sl"]
    assert all(run.spec.data_options == {"task": "mlm"} for run in sources)
    assert len(grid) == 8 * 2 * 3  # methods x training sizes x seeds
    assert {run.method_label for run in grid} == {
        "full",
        "head",
        "bitfit",
        "lnfit",
        "freeze(k=6)",
        "houlsby",
        "lora",
        "mad-x",
    }
    assert {run.spec.train_size for run in grid} == {1000, 5000}
    for run in grid:
        (target,) = run.spec.zero_shot
        assert target.data == "slovenian-opinions"
        swapped = run.method_label == "mad-x"
        assert target.stack_swap == (
            (("lang-en", f"{RUN_REFERENCE}{sources[1].run_id}/lang-sl"),) if swapped else ()
        )
        assert (sources[1].run_id in run.needs) == swapped


def test_the_cpu_example_is_the_whole_experiment_shrunk():
    """The same sources, methods, seeds and zero-shot target at 1,000 examples; only the
    training length and learning rates differ."""
    examples = Path(__file__).resolve().parents[1] / "examples"
    whole = plan_study(load_spec(examples / "xling-e5.yaml"), examples)
    shrunk = plan_study(load_spec(examples / "xling-e5-cpu.yaml"), examples)
    at_1000 = whole[:2] + [run for run in whole[2:] if run.spec.train_size == 1000]
    assert len(shrunk) == 2 + 8 * 3
    for small, big in zip(shrunk, at_1000, strict=True):
        assert small.method_label == big.method_label
        for part in ("model", "data", "data_options"):
            assert getattr(small.spec, part) == getattr(big.spec, part)
        assert small.spec.train.seed == big.spec.train.seed
        assert len(small.spec.stack) == len(big.spec.stack)
        targets = [(t.data, len(t.stack_swap)) for t in small.spec.zero_shot]
        assert targets == [(t.data, len(t.stack_swap)) for t in big.spec.zero_shot]

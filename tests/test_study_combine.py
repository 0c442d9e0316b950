"""A study comparing single-task adapters with their combinations, AdapterFusion across the data
sets and multi-task training: the plan, a tiny study end to end, resuming, and the report."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from study_helpers import save_spec, write_reviews
from tiny_models import save_tiny_bert

from adaptlab.report import render_report
from adaptlab.runs.labelled_run import run_data
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.kind_runs import adapter_folders
from adaptlab.study.planner import plan_study
from adaptlab.study.runner import run_study
from adaptlab.study.spec import load_spec
from adaptlab.study.status import study_status
from adaptlab.study.store import load_records

QUIET = LocalExecutor(progress=False)
METHODS = [
    {"method": {"lora": {"rank": 4}}, "label": "single", "learning_rates": [5e-3]},
    {"combine": {"how": "linear"}, "adapters": ["single"], "label": "linear"},
    {"combine": {"how": "ties", "density": 0.5}, "adapters": ["single"], "label": "ties"},
    {"method": "fusion", "adapters": ["single"], "across_data": True, "label": "fusion"},
    {"method": {"lora": {"rank": 4}}, "multi_task": True, "label": "multi-task"},
]
ORDER = ["single", "linear", "ties", "fusion", "multi-task"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return save_tiny_bert(str(tmp_path_factory.mktemp("tiny-bert")))


def study(folder: Path, model: str, **keys: object) -> Path:
    """Two tiny data sets with different labels beside a spec of the five approaches."""
    write_reviews(folder / "reviews.csv", rows=40)
    with (folder / "topics.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        for i in range(36):
            label = ["sport", "money", "law"][i % 3]
            writer.writerow([f"a {label} story {i % 5}", label])
    spec = {
        "name": "tiny",
        "models": [model],
        "data": ["reviews.csv", "topics.csv"],
        "methods": METHODS,
        "seeds": [0],
        "epochs": 1,
        "batch_size": 8,
        "max_length": 16,
        **keys,
    }
    return save_spec(folder / "tiny.yaml", spec)


def test_spanning_runs_come_after_the_runs_they_build_on(model: str, tmp_path: Path) -> None:
    runs = plan_study(load_spec(study(tmp_path, model, seeds=[0, 1])), tmp_path)
    seed0 = [r for r in runs if r.spec.train.seed == 0]
    assert [r.method_label for r in seed0] == ["single", "single", "multi-task"] + ORDER[1:] * 2
    assert [r.spec.train.seed for r in runs] == [0] * 11 + [1] * 11
    single = {Path(r.spec.data).name: r for r in seed0 if r.method_label == "single"}
    assert [r.adapter_name for r in single.values()] == ["reviews", "topics"]
    assert all(r.keep for r in single.values())
    folders = tuple(f"run:{r.run_id}/{r.adapter_name}" for r in single.values())
    combined = [r for r in seed0 if r.method_label == "ties"]
    for run, head in zip(combined, ("reviews", "topics"), strict=True):
        recipe = run.spec.combine
        assert recipe is not None and recipe.head == head
        assert tuple(s.folder for s in recipe.sources) == folders
        assert [s.weight for s in recipe.sources] == [0.5, 0.5]
        assert (recipe.how, recipe.density, run.spec.methods) == ("ties", 0.5, ())
        assert run.needs == tuple(r.run_id for r in single.values())
        assert run.spec.train == single["reviews.csv"].spec.train
    fusion = next(r for r in seed0 if r.method_label == "fusion")
    assert fusion.spec.fuse == folders and fusion.spec.train.learning_rate is None
    trained, *scored = [r for r in seed0 if r.method_label == "multi-task"]
    assert [Path(t.data).name for t in trained.spec.multi_task] == ["topics.csv"]
    assert trained.keep and trained.spec.methods[0].name == "lora"
    for run in scored:
        assert run.needs == (trained.run_id,)
        assert run.spec.multi_task_adapter == f"run:{trained.run_id}/multi-task"


def test_adding_a_combination_keeps_the_ids_of_the_runs_already_planned(
    model: str, tmp_path: Path
) -> None:
    alone = plan_study(load_spec(study(tmp_path, model, methods=METHODS[:1])), tmp_path)
    together = plan_study(load_spec(study(tmp_path, model)), tmp_path)
    assert {r.run_id for r in alone} <= {r.run_id for r in together}


def test_a_tiny_study_stores_every_approach_resumes_and_reports(model: str, tmp_path: Path) -> None:
    path = study(tmp_path, model)
    summary = run_study(path, executor=QUIET)
    assert not summary.failed and len(summary.outcomes) == 11
    records = load_records(tmp_path / "tiny.db")
    rows = {(r.method_label, r.result.data.name): r.result for r in records}
    union = rows[("multi-task", "reviews + topics")]
    for data, labels in (("reviews", ("fresh", "rotten")), ("topics", ("law", "money", "sport"))):
        for method in ORDER:
            result = rows[(method, data)]
            assert "accuracy" in result.test and result.data.labels == labels, (method, data)
            assert result.test_classes is not None
            assert [c.label for c in result.test_classes] == list(labels)
        for method in ("linear", "ties", "multi-task"):
            untrained = rows[(method, data)]
            assert untrained.epochs == () and untrained.best_epoch == 0
            assert untrained.dev and untrained.wall_seconds
        assert rows[("linear", data)].trainable_parameters == 0
        assert rows[("multi-task", data)].parameter_groups == union.parameter_groups
        assert rows[("single", data)].trainable_parameters > 0
        fused = rows[("fusion", data)].fusion_weights or ()
        assert fused and all(set(site.weights) == {"reviews", "topics"} for site in fused)
    assert union.data.labels == (
        "reviews:fresh",
        "reviews:rotten",
        "topics:law",
        "topics:money",
        "topics:sport",
    )
    kept = sorted(p.name for p in adapter_folders(tmp_path / "tiny.db").iterdir())
    assert len(kept) == 3  # the two single-task runs and the multi-task run
    (status,) = study_status(tmp_path / "tiny.db")
    assert (status.done, status.left, status.changed) == (11, 0, [])

    assert run_study(path, executor=QUIET).outcomes == []

    html = render_report(records, title="tiny")
    section = html[html.index('id="combining"') :]
    section = section[: section.index("</section>")]
    for header in ("<th>setting</th>", *(f"<th>{m}</th>" for m in ORDER)):
        assert header in section, header
    rows = section.split("</tr>")[1:-1]  # one per data set
    assert len(rows) == 2 and all("★\u00a0" in row for row in rows)  # the best (each of a tie)
    assert "Mean gap to the single-task adapters (single) over the data sets: linear " in section
    assert "Pfeiffer et al. (2021" in section and "the claim" in section


def test_a_missing_adapter_folder_trains_again_and_its_combinations_stay_done(
    model: str, tmp_path: Path
) -> None:
    path = study(tmp_path, model, methods=METHODS[:2])
    assert not run_study(path, executor=QUIET).failed
    folders = adapter_folders(tmp_path / "tiny.db")
    gone = sorted(folders.iterdir())[0]
    for item in sorted(gone.rglob("*"), reverse=True):
        item.unlink() if item.is_file() else item.rmdir()
    gone.rmdir()
    again = run_study(path, executor=QUIET)
    assert [o.run.run_id for o in again.outcomes] == [gone.name]
    assert not again.failed


def test_a_combination_refuses_a_source_whose_manifest_names_an_unknown_task(
    model: str, tmp_path: Path
) -> None:
    """The source's own manifest is named, not the combined folder it would have made."""
    assert not run_study(study(tmp_path, model, methods=METHODS[:2]), executor=QUIET).failed
    manifest = sorted(adapter_folders(tmp_path / "tiny.db").glob("*/*/adapter/manifest.json"))[0]
    edited = json.loads(manifest.read_text())
    edited["task"] = "poetry"
    manifest.write_text(json.dumps(edited))
    before = manifest.read_bytes()
    summary = run_study(study(tmp_path, model, methods=METHODS[:3]), executor=QUIET)
    assert len(summary.failed) == 2  # the ties combination on each data set
    for outcome in summary.failed:
        assert outcome.error is not None and "\n" not in outcome.error
        assert f"{manifest}: task names unknown task 'poetry'" in outcome.error
    assert manifest.read_bytes() == before


def test_a_report_without_spanning_runs_has_no_combining_section(
    model: str, tmp_path: Path
) -> None:
    path = study(tmp_path, model, methods=METHODS[:1])
    assert not run_study(path, executor=QUIET).failed
    html = render_report(load_records(tmp_path / "tiny.db"), title="tiny")
    assert 'id="combining"' not in html


def test_test_size_caps_the_test_split_of_every_grid_run(model: str, tmp_path: Path) -> None:
    runs = plan_study(load_spec(study(tmp_path, model, test_size=3)), tmp_path)
    assert {run.spec.test_size for run in runs} == {3}
    for run in runs:
        test = run_data(run.spec, run.spec.data, run.spec.data_options).splits["test"]
        assert len(test) == 3
        assert len({example.label for example in test}) > 1  # stratified, not the first rows


def test_multi_task_alone_is_compared_with_the_single_task_method_beside_it(
    model: str, tmp_path: Path
) -> None:
    path = study(tmp_path, model, methods=[METHODS[0], METHODS[4]])
    assert not run_study(path, executor=QUIET).failed
    html = render_report(load_records(tmp_path / "tiny.db"), title="tiny")
    section = html[html.index('id="combining"') :]
    section = section[: section.index("</section>")]
    assert "<th>single</th>" in section and "<th>multi-task</th>" in section
    assert "Mean gap to the single-task adapters (single) over the data sets: multi-task" in section
    assert "No AdapterFusion across the data sets ran here to test it." in section

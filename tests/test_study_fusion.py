"""Studies that train source adapters and fuse or stack on them: planning, stages, resume."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from study_helpers import write_reviews, write_spec
from tiny_models import save_tiny_bert

from adaptlab.errors import ConfigError
from adaptlab.report import render_report
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.kind_runs import adapter_folders
from adaptlab.study.planner import plan_study
from adaptlab.study.runner import run_study
from adaptlab.study.spec import load_spec
from adaptlab.study.store import load_records

QUIET = LocalExecutor(progress=False)
SOURCES = [
    {"label": "topics", "data": "topics.csv", "method": "pfeiffer", "epochs": 1},
    {"label": "moods", "data": "reviews.csv", "method": "pfeiffer", "train_size": 20},
]
FUSION = {"fusion": {"adapters": ["topics", "moods", "pfeiffer"], "temperature": 2}}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return save_tiny_bert(str(tmp_path_factory.mktemp("tiny-bert")))


def folder_with_data(tmp_path: Path) -> Path:
    write_reviews(tmp_path / "reviews.csv")
    with (tmp_path / "topics.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        for i in range(45):
            label = ["sport", "money", "law"][i % 3]
            writer.writerow([f"a {label} story {i % 7}", label])
    return tmp_path


def fusion_spec(folder: Path, model: str, **keys: object) -> Path:
    methods = ["pfeiffer", FUSION, {"method": "houlsby", "stack": ["topics"]}]
    return write_spec(
        folder,
        model,
        "reviews.csv",
        **{"sources": SOURCES, "methods": methods, "seeds": [0], **keys},
    )


def test_sources_come_first_and_fusions_after_what_they_fuse(model: str, tmp_path: Path) -> None:
    path = fusion_spec(folder_with_data(tmp_path), model, seeds=[0, 1])
    runs = plan_study(load_spec(path), tmp_path)
    labels = [run.method_label for run in runs]
    assert labels[:2] == ["topics", "moods"]
    assert labels[2:] == ["pfeiffer", "fusion(temperature=2)", "houlsby", "pfeiffer"] + [
        "fusion(temperature=2)",
        "houlsby",
    ]
    by_label = {(r.method_label, r.spec.train.seed): r for r in runs}
    fusion = by_label[("fusion(temperature=2)", 1)]
    assert fusion.needs == (
        by_label[("topics", 0)].run_id,  # sources train once, under the first seed
        by_label[("moods", 0)].run_id,
        by_label[("pfeiffer", 1)].run_id,  # the same cell's pfeiffer run
    )
    names = ("topics", "moods", "pfeiffer")
    assert fusion.spec.fuse == tuple(
        f"run:{n}/{m}" for n, m in zip(fusion.needs, names, strict=True)
    )
    assert by_label[("houlsby", 0)].spec.stack == (f"run:{by_label[('topics', 0)].run_id}/topics",)
    kept = {r.method_label for r in runs if r.keep}
    assert kept == {"topics", "moods", "pfeiffer"}


@pytest.mark.parametrize(
    ("methods", "sources", "message"),
    [
        ([{"fusion": {"temperature": 2}}], [], "fusion needs the adapters to fuse"),
        ([{"method": "lora", "adapters": ["x"]}], [], "the method must be fusion"),
        ([{"fusion": {"adapters": ["nowhere"]}}], [], "'nowhere' is no source or method label"),
        (
            ["lora", {"fusion": {"adapters": ["lora"]}}],
            [{"label": "lora", "data": "a.csv", "method": "lora"}],
            "labels both a source and a method",
        ),  # fmt: skip
    ],
)
def test_bad_references_are_one_line(
    model: str, tmp_path: Path, methods: list, sources: list, message: str
) -> None:
    path = write_spec(folder_with_data(tmp_path), model, "reviews.csv", methods=methods,
                      sources=sources)  # fmt: skip
    with pytest.raises(ConfigError, match=message) as error:
        plan_study(load_spec(path), tmp_path)
    assert "\n" not in str(error.value)


def test_a_fusion_study_runs_in_stages_keeps_adapters_and_resumes(
    model: str, tmp_path: Path
) -> None:
    path = fusion_spec(folder_with_data(tmp_path), model)
    summary = run_study(path, executor=QUIET)
    assert not summary.failed and len(summary.outcomes) == 5
    records = {r.method_label: r.result for r in load_records(tmp_path / "tiny.db")}
    fusion = records["fusion(temperature=2)"]
    assert fusion.fusion_weights is not None and len(fusion.fusion_weights) == 2
    for site in fusion.fusion_weights:
        assert set(site.weights) == {"topics", "moods", "pfeiffer"}
        assert sum(site.weights.values()) == pytest.approx(1.0)
    assert records["houlsby"].spec.stack[0].startswith(str(adapter_folders(tmp_path / "tiny.db")))
    kept = sorted(p.name for p in adapter_folders(tmp_path / "tiny.db").iterdir())
    assert len(kept) == 3  # the two sources and the cell's pfeiffer run
    html = render_report(load_records(tmp_path / "tiny.db"), title="tiny")
    assert 'id="fusion"' in html and "fusion weights of fusion(temperature=2) per layer" in html
    for adapter in ("topics", "moods", "pfeiffer"):
        assert f"<td>{adapter}</td>" in html
    assert run_study(path, executor=QUIET).outcomes == []
    shutil.rmtree(adapter_folders(tmp_path / "tiny.db") / kept[0])
    again = run_study(path, executor=QUIET)
    assert [o.run.run_id for o in again.outcomes] == [kept[0]] and not again.failed


def test_a_failed_source_fails_what_builds_on_it(model: str, tmp_path: Path) -> None:
    path = fusion_spec(folder_with_data(tmp_path), model)
    (tmp_path / "topics.csv").write_text("text,label\n")  # no rows: the source run fails
    summary = run_study(path, executor=QUIET)
    failed = {o.run.method_label: o.error or "" for o in summary.failed}
    assert set(failed) == {"topics", "fusion(temperature=2)", "houlsby"}
    assert "has not finished" in failed["fusion(temperature=2)"]
    assert "has not finished" in failed["houlsby"]

"""`adaptlab study report` on a store holding diverged runs (NaN or infinite test scores) and
failed ones (no test score): the report is written, shows each as such and leaves it out of
every mean, and the store is unchanged byte for byte."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest
from cli_cases import run_cli, unchanged
from test_report_records import make_row, stored
from test_report_sequences import sequence

from adaptlab.continual.metrics import stored_scores
from adaptlab.study import ResultStore
from adaptlab.study.planner import plan_study
from adaptlab.study.spec import load_spec

NAN, INF = math.nan, math.inf


def write_store(folder: Path, tests: dict[tuple[str, int], float | None]) -> Path:
    """A store of a study over `tests`' methods and seeds, each run's test accuracy as given
    (None: a run with no test score at all)."""
    folder.mkdir()
    spec = folder / "s.yaml"
    methods = sorted({method for method, _ in tests})
    seeds = sorted({seed for _, seed in tests})
    spec.write_text(
        f"name: s\nmodels: [minilm-l6]\ndata: [rotten-tomatoes]\nmethods: [{', '.join(methods)}]"
        f"\nseeds: [{', '.join(map(str, seeds))}]\n"
    )
    store = folder / "s.db"
    with ResultStore(store) as results:
        planned = plan_study(load_spec(spec), folder)
        results.set_plan("s", planned)
        for run in planned:
            method, seed = run.method_label, run.spec.train.seed
            value = tests[(method, seed)]
            row = make_row(
                study="s", method=method, seed=seed, test=0.5 if value is None else value
            )
            if value is None:
                row["test"] = {}
            results.start(run)
            results.finish(run.run_id, stored(row).result)
    return store


def report(store: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Run `adaptlab study report`, which must succeed without touching the store's folder;
    the page comes back."""
    with unchanged(store.parent):
        code, printed, err = run_cli(["study", "report", str(store), "-o", str(out)], capsys)
    assert code == 0, err
    assert "written to" in printed and "Traceback" not in err
    return out.read_text()


def rows_of(page: str, section: str) -> list[list[str]]:
    """The table rows of one section, cell by cell, markup removed."""
    part = page[page.index(f'<section id="{section}">') :]
    part = part[: part.index("</section>")]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", part.replace("\n", ""))
    cells = [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td>(.*?)</td>", r)] for r in rows]
    return [row for row in cells if row]


def test_nan_and_infinite_scores_are_shown_as_diverged_and_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tests = {("lora", 0): NAN, ("lora", 1): 0.8, ("bitfit", 0): INF, ("bitfit", 1): -INF}
    store = write_store(tmp_path / "in", tests)
    page = report(store, tmp_path / "out" / "r.html", capsys)
    results = {row[0].lstrip("★\u00a0"): row for row in rows_of(page, "results") if row}
    assert results["lora"][2] == "1 of 2" and results["lora"][3].startswith("0.800 ± 0.000")
    assert "(1 diverged, left out)" in results["lora"][3]
    assert results["bitfit"][2] == "0 of 2" and results["bitfit"][3] == "diverged"
    assert "3 runs left out of the means" in page
    verdict = page[page.index('<section id="what-to-use">') :]
    assert "only lora has a score" in verdict and "Left out: bitfit (2 diverged)" in verdict
    text = re.sub(r'data:image/[^"]+', "", page)  # the page without its images
    assert not re.search(r"\bnan\b|\binf\b", text)  # no NaN or infinity written as Python does


def test_a_run_without_test_scores_is_shown_as_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = write_store(tmp_path / "in", {("lora", 0): None, ("lora", 1): 0.7})
    page = report(store, tmp_path / "out" / "r.html", capsys)
    (row,) = [row for row in rows_of(page, "results") if row]
    assert row[2] == "1 of 2" and "(1 without a score, left out)" in row[3]


def test_a_study_whose_every_run_diverged_still_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = write_store(tmp_path / "in", {("lora", 0): NAN, ("bitfit", 0): NAN})
    page = report(store, tmp_path / "out" / "r.html", capsys)
    assert "no method has a finite test score" in page
    assert [row[3] for row in rows_of(page, "results") if row] == ["diverged", "diverged"]


def test_a_diverged_sequence_is_a_diverged_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = [
        sequence("sequential", 0, [[0.9, 0.5], [0.6, 0.8]], [0.9, 0.7]),
        _diverged(*sequence("sequential", 1, [[0.9, 0.5], [0.4, 0.9]], [0.8, 0.9])),
        _diverged(*sequence("adapter-per-stage", 0, [[0.9, 0.5], [0.9, 0.8]], None)),
    ]
    folder = tmp_path / "in"
    folder.mkdir()
    store = folder / "cl.db"
    with ResultStore(store) as results:
        results.set_plan("cl", [planned for planned, _ in made])
        for planned, result in made:
            results.start(planned)
            results.finish_sequence(planned.run_id, result)
    page = report(store, tmp_path / "out" / "cl.html", capsys)
    assert rows_of(page, "continual") == [
        ["houlsby · sequential", "1 of 2 (1 diverged)", "0.700 ± 0.000", "-0.300 ± 0.000",
         "+0.100 ± 0.000", "+0.300 ± 0.000"],
        ["houlsby · adapter-per-stage", "0 of 1 (1 diverged)", *["diverged"] * 4],
    ]  # fmt: skip
    assert "houlsby · adapter-per-stage: every seed diverged" in page


def _diverged(planned, result):  # type: ignore[no-untyped-def]
    """The sequence with its first cell NaN and its last infinite, as a store would hold it."""
    matrix = [list(row) for row in result.matrix]
    matrix[0][0], matrix[-1][-1] = NAN, INF
    tests = tuple(tuple({"accuracy": v, "loss": 0.5} for v in row) for row in matrix)
    scores = stored_scores(matrix, result.single_stage, result.metric)
    changed = dataclasses.replace(
        result, matrix=tuple(map(tuple, matrix)), tests=tests, scores=scores
    )
    return planned, changed

"""A study of runs: its grid (`planner`), the run folders kept beside the store for the runs
other runs build on, and its stop on a `metric:` the data's task does not compute."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rich.console import Console

from adaptlab.engine.outputs import METRICS_FILE
from adaptlab.records.result import RunResult
from adaptlab.study.kind import StudyKind
from adaptlab.study.planned import Outcome
from adaptlab.study.planner import PlannedRun, plan_study
from adaptlab.study.progress import RunProgress
from adaptlab.study.store import ResultStore
from adaptlab.tasks.judging import require_metric


def adapter_folders(store: Path) -> Path:
    """Where a study keeps the run folders other runs build on: `<store name>-adapters/`."""
    return store.with_name(f"{store.stem}-adapters")


class RunKind(StudyKind[PlannedRun, RunResult]):
    """The runs of a study of single runs."""

    folders_beside = staticmethod(adapter_folders)

    def plan(self) -> list[PlannedRun]:
        return plan_study(self.spec, self.spec_folder)

    def changed(self, stale: list[PlannedRun], stored: Mapping[str, str | None]) -> str:
        """Which data changed under how many done runs."""
        first = stale[0]
        same = [run for run in stale if run.spec.data == first.spec.data]
        others = len(stale) - len(same)
        before, now = stored[first.run_id] or "", first.data_digest or ""
        more = f" (and {others} more runs on other changed data)" if others else ""
        runs = f"{len(same)} done run{'s' if len(same) > 1 else ''} of study {first.study}"
        return (
            f"{first.spec.data} changed since {runs} trained on it (contents {before[:12]} then, "
            f"{now[:12]} now){more}"
        )

    def reconcile(
        self, items: list[PlannedRun], results: ResultStore, states: dict[str, str]
    ) -> None:
        """A done run other runs build on whose folder is gone runs again."""
        for run in items:
            if run.keep and states.get(run.run_id) == "done" and not _folder_done(run):
                results.reopen(run.run_id, "its adapter folder is missing")
                states[run.run_id] = "failed"

    def progress(self, console: Console, total: int, done_before: int, to_run: int) -> RunProgress:
        return RunProgress(console, total, done_before, to_run, self.spec.metric)

    def settled(self, outcome: Outcome[RunResult]) -> None:
        """Stop the study after its first run on data whose task does not compute `metric:`."""
        result = outcome.result
        if self.spec.metric is not None and result is not None:
            require_metric(self.spec.metric, result.test, result.data.name, result.data.task)


def _folder_done(run: PlannedRun) -> bool:
    return run.out is not None and (Path(run.out) / METRICS_FILE).is_file()

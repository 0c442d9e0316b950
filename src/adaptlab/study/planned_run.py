"""A run of a study's grid as the planner makes it (`PlannedRun`), its stable id, and how a
run's spec names the folder of another run it builds on."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path

from adaptlab.engine.adapters import as_adapter_name
from adaptlab.engine.inputs import run_inputs
from adaptlab.integrations.trackers.choice import Tracking
from adaptlab.records.result import RunResult
from adaptlab.records.spec import RunSpec
from adaptlab.study.analysis import AnalysisRequest
from adaptlab.study.executors import run_one
from adaptlab.study.planned import Outcome, StageDone, cell_line, cell_tags

RUN_REFERENCE = "run:"
"""How a spec names the folder of another run of the study: run:<run id>/<adapter name>."""


@dataclass(frozen=True)
class PlannedRun:
    """One cell of the grid: its id, study, method label, the spec `execute` gets, the
    analyses to run on the trained model (with the lm-eval tasks to score a language model on,
    `study.harness`) and the hash of its data file's contents (neither is part of the id:
    asking for analyses or harness scores later does not re-train runs already done, and a
    data file edited in place is found by comparing hashes, see `study.runner`).

    `needs`: runs whose adapter folders this run builds on (its spec names them as
    run:<id>); `keep`: other runs build on this one, so its folder is written. `out` is
    where the folder goes, and `tracking` where the run reports (`report_to:`), both set by
    the runner. `adapter_label`: the label that names its adapter folder, where `method_label`
    adds the scale of a study that varies it (None: `method_label`).
    """

    run_id: str
    study: str
    method_label: str
    spec: RunSpec
    analysis: AnalysisRequest = AnalysisRequest()
    needs: tuple[str, ...] = ()
    keep: bool = False
    out: str | None = None
    data_digest: str | None = None
    tracking: Tracking | None = None
    adapter_label: str | None = None

    @property
    def adapter_name(self) -> str:
        """The name of the adapter the run trains, and of its folder when it is kept."""
        return as_adapter_name(self.adapter_label or self.method_label)

    @property
    def strategy_label(self) -> None:
        """A run has no strategy."""
        return None

    @property
    def label(self) -> str:
        """The method label: what status and reports call the run's arm."""
        return self.method_label

    @property
    def data_name(self) -> str:
        """The data the run trains on: its data set, or a multi-task run's data sets."""
        sources = [self.spec.data, *(task.data for task in self.spec.multi_task)]
        return " + ".join(Path(source).name for source in sources)

    def describe(self) -> str:
        """A short human line: method · data · size · seed · learning rate · model."""
        return cell_line(f"{self.method_label} · {self.data_name}", self.spec)

    def tracking_tags(self) -> dict[str, str]:
        """What the run's cell varies: model, data, method, train size, seed, learning rate."""
        return cell_tags(self.spec, data=self.data_name, method=self.method_label)

    def inputs(self) -> list[tuple[Path, str]]:
        """The run's base model, data and adapter folders that exist here."""
        return run_inputs(self.spec)

    def execute(self, progress: bool, on_stage: StageDone | None = None) -> Outcome[RunResult]:
        """Train the run (and its analyses and harness scores; lm-eval's results file joins its
        folder) in this process; a run has no stages to report."""
        result, error, seconds = run_one(
            self.spec, progress, self.analysis, self.out, self.tracking
        )
        return Outcome(self, result, error, seconds)

    def placed(self, folders: Path, tracking: Tracking | None = None) -> PlannedRun:
        """This run with its references made folders under `folders` (and its own, if kept),
        reporting to `tracking`."""

        def folder(reference: str) -> str:
            if reference.startswith(RUN_REFERENCE):
                return str(folders / reference.removeprefix(RUN_REFERENCE))
            return reference

        combine, adapter = self.spec.combine, self.spec.multi_task_adapter
        spec = replace(
            self.spec,
            fuse=tuple(map(folder, self.spec.fuse)),
            stack=tuple(map(folder, self.spec.stack)),
            zero_shot=tuple(
                replace(t, stack_swap=tuple((name, folder(ref)) for name, ref in t.stack_swap))
                for t in self.spec.zero_shot
            ),
            combine=None if combine is None else combine.placed(folder),
            multi_task_adapter=None if adapter is None else folder(adapter),
        )
        out = str(folders / self.run_id / self.adapter_name) if self.keep else None
        return replace(self, spec=spec, out=out, tracking=tracking)


def run_id(spec: RunSpec) -> str:
    """12 hex digits of the SHA-256 of the resolved spec as canonical JSON."""
    text = json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def source_folder(run: PlannedRun) -> str:
    """How a run's spec names the folder of `run`, which it builds on."""
    return f"{RUN_REFERENCE}{run.run_id}/{run.adapter_name}"

"""Run a study's runs as Ray tasks on a local or remote Ray cluster (`--executor ray`).

One task per run, each asking for the spec's `resources` (cpus, gpus). The driver keeps at
most as many tasks in flight as the cluster can run at once, marks each running as it is
submitted, and writes each outcome to the store as `ray.wait` hands it back: tasks never touch
the store, so it keeps a single writer. Ray is an optional extra (`pip install ray==2.60.0`).
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Generator, Sequence
from types import ModuleType
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.study.analysis import AnalysisRequest
from adaptlab.study.executors import Outcome, Started, one_line, run_one
from adaptlab.study.planner import PlannedRun
from adaptlab.study.spec import Resources
from adaptlab.train.result import RunResult
from adaptlab.train.spec import RunSpec

RAY_HINT = "the Ray executor needs `pip install ray==2.60.0`"


def import_ray() -> ModuleType:
    """The `ray` module, or a one-line error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(RAY_HINT) from None
    return ray


def execute_task(
    spec: RunSpec, analysis: AnalysisRequest | None = None, out: str | None = None
) -> tuple[RunResult | None, str | None, float]:
    """The body of one Ray task: run the spec (and its analyses) without a progress bar.

    A run other runs build on writes its folder to `out`, which must be on a file system the
    driver's machine shares (the study store's folder).
    """
    return run_one(spec, progress=False, analysis=analysis, out=out)


class RayExecutor:
    """Runs each run as a Ray task; starts a local Ray unless one is running or `address` given."""

    name = "ray"

    def __init__(
        self, resources: Resources, address: str | None = None, num_cpus: int | None = None
    ) -> None:
        if address is not None and num_cpus is not None:
            raise ConfigError("--ray-cpus sizes a local Ray; leave it out with --address")
        self._ray = import_ray()  # fail before any work when Ray is missing
        self.resources = resources
        self.address = address
        self.num_cpus = num_cpus

    def run(self, runs: Sequence[PlannedRun], started: Started) -> Generator[Outcome, None, None]:
        ray = self._ray
        own = not ray.is_initialized()
        if own:
            ray.init(
                address=self.address,
                num_cpus=self.num_cpus,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
        pending: dict[Any, PlannedRun] = {}
        try:
            task = ray.remote(
                num_cpus=self.resources.cpus, num_gpus=self.resources.gpus, max_retries=0
            )(execute_task)
            width = self._width(ray)
            queue = deque(runs)
            while queue or pending:
                while queue and len(pending) < width:
                    run = queue.popleft()
                    started(run)
                    pending[task.remote(run.spec, run.analysis, run.out)] = run
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    yield self._outcome(ray, ref, pending.pop(ref))
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)
            if own:
                ray.shutdown()

    def _width(self, ray: ModuleType) -> int:
        """How many runs the cluster can hold at once with the spec's resources."""
        cluster = ray.cluster_resources()
        width = math.floor(cluster.get("CPU", 0) / self.resources.cpus + 1e-9)
        if self.resources.gpus:
            width = min(width, math.floor(cluster.get("GPU", 0) / self.resources.gpus + 1e-9))
        if width < 1:
            raise ConfigError(
                f"each run asks for {self.resources.cpus:g} CPUs and {self.resources.gpus:g} "
                f"GPUs (resources: in the spec), more than the Ray cluster has "
                f"({cluster.get('CPU', 0):g} CPUs, {cluster.get('GPU', 0):g} GPUs)"
            )
        return width

    @staticmethod
    def _outcome(ray: ModuleType, ref: Any, run: PlannedRun) -> Outcome:
        try:
            result, error, seconds = ray.get(ref)
        except ray.exceptions.RayError as failure:
            cause = getattr(failure, "cause", None) or failure
            return Outcome(
                run, None, f"Ray task failed: {type(cause).__name__}: {one_line(cause)}", 0.0
            )
        return Outcome(run, result, error, seconds)

"""Run a study's runs (or sequences) as Ray tasks on a local or remote Ray cluster
(`--executor ray`).

One task per run or sequence, each asking for the spec's `resources` (cpus, gpus: a share such
as 0.25 packs four runs on one GPU). The driver keeps at most as many tasks in flight as the
cluster can run at once, marks each running as it is submitted, and writes each outcome to the
store as `ray.wait` hands it back, a sequence's finished stages first: tasks never touch the
store, so it keeps a single writer, and a result arrives once however often Ray ran it. Ray
runs a task again elsewhere when its node or worker process dies (`max_retries`), never when the
run itself raised (`retry_exceptions=False`: a user's error is recorded once); `ray_nodes` logs
the losses. Ray is an optional extra (`pip install ray==2.60.0`).
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import replace
from types import ModuleType
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.study.executors import (
    StageFinished,
    Stages,
    Started,
    one_line,
    run_collecting,
)
from adaptlab.study.planned import Outcome, Planned, R
from adaptlab.study.ray_nodes import WATCH_SECONDS, NodeWatch, lost_line
from adaptlab.study.spec_resources import Resources
from adaptlab.threads import threads_for_cpus

RAY_HINT = "the Ray executor needs `pip install ray==2.60.0`"


def import_ray() -> ModuleType:
    """The `ray` module, or a one-line error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(RAY_HINT) from None
    return ray


def execute_task(run: Planned[R]) -> tuple[Outcome[R], Stages]:
    """The body of one Ray task: run the item (a run and its analyses, or a sequence) without
    a progress bar; a sequence's finished stages come back with its outcome.

    A run other runs build on writes its folder to `run.out`, and a sequence keeps its state in
    `run.checkpoint`; both must be on a file system the driver's machine shares (beside the
    study's store), as must the tracking's TensorBoard folder and file store, whose trackers the
    task opens itself (`tracking` is plain data).
    """
    return run_collecting(run)


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

    def run(
        self, runs: Sequence[Planned[R]], started: Started[R], stage_done: StageFinished[R]
    ) -> Generator[Outcome[R], None, None]:
        self._check_devices(runs)
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
        pending: dict[Any, Planned[R]] = {}
        try:
            task = self._task(ray)
            width = self._width(ray)
            watch = NodeWatch(ray, self.resources.max_retries)
            queue = deque(runs)
            while queue or pending:
                while queue and len(pending) < width:
                    run = queue.popleft()
                    started(run)
                    named = task.options(
                        name=f"adaptlab run {run.run_id}", runtime_env=self._threads()
                    )
                    arguments: tuple[Any, ...] = (run,)
                    if self.resources.nproc > 1:
                        arguments += (self.resources,)
                    pending[named.remote(*arguments)] = run
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=WATCH_SECONDS)
                watch.check(pending)
                for ref in ready:
                    yield self._outcome(ray, ref, pending.pop(ref), stage_done)
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)
            if own:
                ray.shutdown()

    def _task(self, ray: ModuleType) -> Any:
        """The remote function a run is: the run itself with the spec's resources, or, with
        `nproc` > 1, a task that holds nothing and starts its Ray Train workers, which do."""
        resources = self.resources
        body: Callable[..., tuple[Outcome[Any], Stages]]
        if resources.nproc > 1:
            from adaptlab.study.ray_train import train_on_workers

            body, cpus, gpus = train_on_workers, 0.0, 0.0
        else:
            body, cpus, gpus = execute_task, resources.cpus, resources.gpus
        return ray.remote(
            num_cpus=cpus,
            num_gpus=gpus,
            max_retries=resources.max_retries,
            retry_exceptions=False,
        )(body)

    def _threads(self) -> dict[str, dict[str, str]]:
        """The runtime environment of a run's task: its threads and OpenMP wait policy, set
        before its torch loads (`adaptlab.threads`), from the CPUs each of its processes asks
        for (a Ray Train worker inherits it)."""
        return {"env_vars": threads_for_cpus(self.resources.cpus).environment()}

    def _check_devices(self, runs: Sequence[Planned[R]]) -> None:
        """Ray places runs by the GPUs they ask for, and shows each only its own, from cuda:0."""
        cuda = sorted({run.spec.device for run in runs if run.spec.device.startswith("cuda")})
        if cuda and not self.resources.gpus:
            raise ConfigError(
                f"runs on {cuda[0]} ask Ray for no GPU, so Ray would pile them onto one: add "
                "resources: {gpus: 1} to the spec (or gpus: 0.25 to put four runs on a GPU)"
            )
        named = [device for device in cuda if device not in ("cuda", "cuda:0")]
        if named:
            raise ConfigError(
                f"device: {named[0]} names a GPU of this machine, but a run on Ray sees only "
                "the GPUs Ray gave it, from cuda:0; write device: cuda"
            )

    def _width(self, ray: ModuleType) -> int:
        """How many runs the cluster can hold at once with the spec's resources."""
        cluster = ray.cluster_resources()
        processes = self.resources.nproc
        width = math.floor(cluster.get("CPU", 0) / (self.resources.cpus * processes) + 1e-9)
        if self.resources.gpus:
            gpus = self.resources.gpus * processes
            width = min(width, math.floor(cluster.get("GPU", 0) / gpus + 1e-9))
        if width < 1:
            raise ConfigError(
                f"each run asks for {self.resources.cpus:g} CPUs and {self.resources.gpus:g} "
                f"GPUs{f' on each of {processes} processes' if processes > 1 else ''} "
                "(resources: in the spec), more than the Ray cluster has "
                f"({cluster.get('CPU', 0):g} CPUs, {cluster.get('GPU', 0):g} GPUs)"
            )
        return width

    def _outcome(
        self, ray: ModuleType, ref: Any, run: Planned[R], stage_done: StageFinished[R]
    ) -> Outcome[R]:
        """The outcome of `run`'s task, its finished stages handed to `stage_done` first."""
        try:
            outcome, stages = ray.get(ref)
        except ray.exceptions.NodeDiedError as failure:
            return Outcome(run, None, lost_line(failure, self.resources.max_retries), 0.0)
        except ray.exceptions.RayError as failure:
            cause = getattr(failure, "cause", None) or failure
            return Outcome(
                run, None, f"Ray task failed: {type(cause).__name__}: {one_line(cause)}", 0.0
            )
        for index, stage in stages:
            stage_done(run, index, stage)
        return replace(outcome, run=run)

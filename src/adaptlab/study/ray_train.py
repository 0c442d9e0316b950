"""A study run that asks for several processes (`resources: {nproc: N}`) trains on N workers of
Ray Train's `TorchTrainer`, which places them on the cluster (each with the spec's `cpus` and
`gpus`) and makes their process group (gloo, or NCCL with GPUs); adaptlab's run pipeline joins
that group as it joins torchrun's (`adaptlab.engine.process_group`), so each worker trains its
share of every batch and the first alone writes anything.

The first worker hands its outcome to a small mailbox actor the launching task made, so the
result comes back to the driver (the store's single writer) without shared storage.
"""

from __future__ import annotations

import tempfile
from typing import Any

from adaptlab.records.result import RunResult
from adaptlab.records.spec import RunSpec
from adaptlab.study.analysis import AnalysisRequest
from adaptlab.study.spec import Resources

Outcome = tuple[RunResult | None, str | None, float]


class Mailbox:
    """Holds the first worker's outcome until the launching task takes it (a Ray actor)."""

    def __init__(self) -> None:
        self.outcome: Outcome | None = None

    def put(self, outcome: Outcome) -> None:
        self.outcome = outcome

    def take(self) -> Outcome | None:
        return self.outcome


def train_on_workers(
    spec: RunSpec,
    analysis: AnalysisRequest | None,
    out: str | None,
    tracking: Any,
    resources: Resources,
) -> Outcome:
    """The body of the Ray task of a multi-process run: train on `resources.nproc` Ray Train
    workers and return the first worker's outcome (as `run_one` gives it)."""
    import ray
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    mailbox: Any = ray.remote(num_cpus=0)(Mailbox).remote()
    per_worker = {"CPU": resources.cpus} | ({"GPU": resources.gpus} if resources.gpus else {})
    trainer = TorchTrainer(
        _worker,
        train_loop_config={
            "spec": spec,
            "analysis": analysis,
            "out": out,
            "tracking": tracking,
            "mailbox": mailbox,
        },
        torch_config=TorchConfig(backend="nccl" if resources.gpus else "gloo"),
        scaling_config=ScalingConfig(
            num_workers=resources.nproc,
            use_gpu=bool(resources.gpus),
            resources_per_worker=per_worker,
        ),
        run_config=RunConfig(
            storage_path=tempfile.mkdtemp(prefix="adaptlab-ray-train-"),
            # a worker lost with its node: Ray Train starts the group again, the run from the start
            failure_config=FailureConfig(max_failures=resources.max_retries),
        ),
    )
    trainer.fit()
    outcome: Outcome | None = ray.get(mailbox.take.remote())
    if outcome is None:
        raise RuntimeError("the Ray Train workers ended without the run's outcome")
    return outcome


def _worker(config: dict[str, Any]) -> None:
    """One Ray Train worker: the run pipeline in the group Ray Train made."""
    import ray

    from adaptlab.parallel.ranks import is_main_process
    from adaptlab.study.executors import run_one

    outcome = run_one(
        config["spec"],
        progress=False,
        analysis=config["analysis"],
        out=config["out"],
        tracking=config["tracking"],
    )
    if is_main_process():
        ray.get(config["mailbox"].put.remote(outcome))

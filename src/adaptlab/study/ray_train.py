"""A study run (or sequence) that asks for several processes (`resources: {nproc: N}`) trains on
N workers of Ray Train's `TorchTrainer`, which places them on the cluster (each with the spec's
`cpus` and `gpus`) and makes their process group (gloo, or NCCL with GPUs); adaptlab's run and
sequence pipelines join that group as they join torchrun's (`adaptlab.engine.process_group`),
so each worker trains its share of every batch and the first alone writes anything.

The first worker hands its outcome to a small mailbox actor the launching task made, so the
result comes back to the driver (the store's single writer) without shared storage.
"""

from __future__ import annotations

import tempfile
from typing import Any

from adaptlab.study.executors import Stages, run_collecting
from adaptlab.study.planned import Outcome, Planned, R
from adaptlab.study.spec_resources import Resources

Handed = tuple[Outcome[Any], Stages]
"""The first worker's outcome and the stages it finished, as `run_collecting` gives them."""


class Mailbox:
    """Holds the first worker's outcome until the launching task takes it (a Ray actor)."""

    def __init__(self) -> None:
        self.outcome: Handed | None = None

    def put(self, outcome: Handed) -> None:
        self.outcome = outcome

    def take(self) -> Handed | None:
        return self.outcome


def train_on_workers(run: Planned[R], resources: Resources) -> tuple[Outcome[R], Stages]:
    """The body of the Ray task of a multi-process run or sequence: train on `resources.nproc`
    Ray Train workers and return the first worker's outcome and finished stages."""
    import ray
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    mailbox: Any = ray.remote(num_cpus=0)(Mailbox).remote()
    per_worker = {"CPU": resources.cpus} | ({"GPU": resources.gpus} if resources.gpus else {})
    trainer = TorchTrainer(
        _worker,
        train_loop_config={"run": run, "mailbox": mailbox},
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
    handed: Handed | None = ray.get(mailbox.take.remote())
    if handed is None:
        raise RuntimeError("the Ray Train workers ended without the run's outcome")
    return handed


def _worker(config: dict[str, Any]) -> None:
    """One Ray Train worker: the run (or sequence) pipeline in the group Ray Train made."""
    import ray

    from adaptlab.parallel.ranks import is_main_process

    handed = run_collecting(config["run"])
    if is_main_process():
        ray.get(config["mailbox"].put.remote(handed))

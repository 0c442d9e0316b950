"""Data-parallel training steps: bytes all-reduced per step and step time of each method on
2 processes x 1 thread (gloo; NCCL with `--device cuda`) against 1 process x 2 threads.

Model: the offline all-MiniLM-L6-v2 (`minilm-l6`) with a fresh two-label head, adapted by each
method at its defaults. Batch: 16 x 128 random token ids (seed 0), full attention mask, random
labels, dropout on; every step goes through adaptlab's epoch loop (`train_epochs`) over an
objective of random batches, so the two-process steps take the product's path: each process
builds the global batch, trains on its 8 examples, and DistributedDataParallel averages the
trainable tensors' gradients. "bytes / step" is what each step all-reduces (the trainable
tensors' float32 gradients); step time is the median over the timed steps (after `--warmup`),
taken by an observer of the loop on the first process. Each configuration is a fresh run,
side by side in one invocation; the ratio is 2 processes over 1.

Usage (from the repository root)::

    .venv/bin/python benchmarks/distributed_step.py            # every method below, ~10 min
    .venv/bin/python benchmarks/distributed_step.py --methods lora,houlsby --steps 4
    .venv/bin/python benchmarks/distributed_step.py --device cuda   # NCCL, one GPU a process
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

METHODS = ("full", "houlsby", "pfeiffer", "lora", "ia3", "prefix", "bitfit", "lnfit")
RESULTS = Path(__file__).parent / "results" / "distributed_step.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--steps", type=int, default=6, help="timed steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--answer", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.threads, args.steps + args.warmup, args.warmup, args)
        return
    rows = []
    for method in args.methods.split(","):
        alone = run_configuration(method, processes=1, threads=2, args=args)
        shared = run_configuration(method, processes=2, threads=1, args=args)
        rows.append(
            {
                "method": method,
                "trainable_parameters": alone["trainable"],
                "bytes_per_step": shared["bytes_per_step"],
                "step_seconds_1x2": alone["step_seconds"],
                "step_seconds_2x1": shared["step_seconds"],
                "ratio_2x1_over_1x2": shared["step_seconds"] / alone["step_seconds"],
            }
        )
        show(rows[-1])
    full = next((r["bytes_per_step"] for r in rows if r["method"] == "full"), None)
    for row in rows:
        row["bytes_share_of_full"] = row["bytes_per_step"] / full if full else None
    report = {
        "benchmark": "distributed_step",
        "device": args.device,
        "backend": "nccl" if args.device == "cuda" else "gloo",
        "batch": [16, 128],
        "steps": args.steps,
        "warmup": args.warmup,
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor()},
        "rows": rows,
    }
    target = RESULTS if args.device == "cpu" else RESULTS.with_name("distributed_step_cuda.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwritten to {target}")


def show(row: dict[str, Any]) -> None:
    if row["method"] == "full" or not hasattr(show, "header"):
        print(f"{'method':10} {'trainable':>11} {'bytes/step':>12} {'1x2 s':>7} {'2x1 s':>7} ratio")
        show.header = True  # type: ignore[attr-defined]
    print(
        f"{row['method']:10} {row['trainable_parameters']:>11,} {row['bytes_per_step']:>12,} "
        f"{row['step_seconds_1x2']:>7.3f} {row['step_seconds_2x1']:>7.3f} "
        f"{row['ratio_2x1_over_1x2']:.2f}"
    )


def run_configuration(
    method: str, processes: int, threads: int, args: argparse.Namespace
) -> dict[str, Any]:
    """One fresh run of `method` on `processes` x `threads`; what its first process measured."""
    with tempfile.TemporaryDirectory() as folder:
        answer = Path(folder) / "answer.json"
        own = [
            __file__, "--worker", method, "--threads", str(threads), "--steps", str(args.steps),
            "--warmup", str(args.warmup), "--device", args.device, "--answer", str(answer),
        ]  # fmt: skip
        launcher = [sys.executable]
        if processes > 1:
            launcher += ["-m", "torch.distributed.run", "--standalone"]
            launcher += ["--nproc-per-node", str(processes)]
        environment = os.environ | {"OMP_NUM_THREADS": str(threads)}
        subprocess.run([*launcher, *own], check=True, env=environment)
        return dict(json.loads(answer.read_text()))


def worker(method: str, threads: int, steps: int, warmup: int, args: argparse.Namespace) -> None:
    """Train `steps` steps of `method` in the loop; the first process writes what it saw."""
    import torch

    from adaptlab import adapt
    from adaptlab.engine.data_parallel import gradient_bytes
    from adaptlab.engine.events import observing
    from adaptlab.engine.loop import train_epochs
    from adaptlab.engine.objective import DevScore
    from adaptlab.engine.process_group import process_group
    from adaptlab.engine.scale_model import FLOAT32
    from adaptlab.models.loading import load_model
    from adaptlab.parallel.ranks import is_main_process
    from adaptlab.parallel.ranks import process_count as probe_count
    from adaptlab.records.config import TrainConfig

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    with process_group(torch.device(args.device)) as device:
        loaded = load_model("minilm-l6", "single_label", num_labels=2, seed=0)
        model = loaded.model.to(device)
        adapt(model, method, seed=0)
        generator = torch.Generator().manual_seed(0)
        ids = torch.randint(1000, 30000, (16 * steps, 128), generator=generator)
        labels = torch.randint(0, 2, (16 * steps,), generator=generator)

        class RandomBatches:
            title, metric, examples = "", "loss", 16 * steps

            def batch(self, indices: list[int], _: torch.Generator) -> dict[str, torch.Tensor]:
                picked = torch.tensor(indices)
                batch = {"input_ids": ids[picked], "labels": labels[picked]}
                batch["attention_mask"] = torch.ones_like(batch["input_ids"])
                return {k: v.to(device) for k, v in batch.items()}

            def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
                return model(**batch).loss  # type: ignore[no-any-return]

            def dev(self) -> DevScore:
                return DevScore(0.0, {"loss": 0.0}, 0.0)

        times: list[float] = []

        class Clock:
            def on_step(self, title: str, step: int, loss: float, learning_rate: float) -> None:
                times.append(time.perf_counter())

            def on_epoch(self, *_: Any) -> None:
                pass

        started = time.perf_counter()
        config = TrainConfig(epochs=1, batch_size=16, learning_rate=1e-4)
        with observing(Clock()):
            train_epochs(model, RandomBatches(), config, 1e-4, scale=FLOAT32, progress=False)
        gaps = [b - a for a, b in zip([started, *times], times, strict=False)][warmup:]
        if is_main_process():
            answer = {
                "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
                "bytes_per_step": gradient_bytes(model) if probe_count() > 1 else 0,
                "step_seconds": statistics.median(gaps),
            }
            Path(args.answer).write_text(json.dumps(answer))


if __name__ == "__main__":
    main()

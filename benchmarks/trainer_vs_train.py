"""The Hugging Face Trainer route against `adaptlab train`, same settings, on MiniLM-L6 and
Rotten Tomatoes (1,000 training examples, seeds 0-2): do they reach the same test accuracy?

Both routes start from the same thing: `prepare_classification` of one `RunSpec` gives the
seed's 1,000 training and 1,000 dev examples (the low-resource protocol), the seeded head and
adapter, and the tokenised splits. adaptlab's route is `execute` (what `adaptlab train` runs).
The Trainer route trains that model with `transformers.Trainer` and
`AdapterCheckpointCallback`, with adaptlab's defaults written as TrainingArguments: AdamW, the
method's learning rate, batch 16, 10 epochs, linear schedule with 10% warm-up, weight decay
0.01, gradient clipping at 1.0, dev accuracy after every epoch and the best epoch's weights
kept (`load_best_model_at_end`, from the callback's slim checkpoints). Both are then scored on
the same test split by adaptlab's `test()`.

What still differs: the example order and dropout masks (each route draws its own from the
seed); the warm-up's first step (the Trainer's schedule starts at 0, adaptlab's at 1/warm-up);
which tensors get weight decay (matrices here, everything but biases and LayerNorms in the
Trainer: the same tensors for LoRA and its head).

Usage (from the repository root; with `--epochs 3 --jobs 6`, 27 minutes on 2 busy cores)::

    nice -n 10 .venv/bin/python benchmarks/trainer_vs_train.py [--method lora] [--jobs 6] [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import EvalPrediction, Trainer, TrainingArguments

from adaptlab.integrations.hf import AdapterCheckpointCallback
from adaptlab.records.config import TrainConfig
from adaptlab.runs.labelled_run import prepare_classification
from adaptlab.runs.run import RunSpec, execute
from adaptlab.tasks.single_label import SINGLE_LABEL

OUT = Path(__file__).resolve().parent / "results" / "trainer_vs_train.json"
MODEL, DATA = "minilm-l6", "rotten-tomatoes"


def spec_for(
    method: str, seed: int, train_size: int, epochs: int, learning_rate: float | None
) -> RunSpec:
    train = TrainConfig(epochs=epochs, seed=seed, learning_rate=learning_rate)
    return RunSpec.build(MODEL, DATA, method, train_size=train_size, train=train, device="cpu")


def adaptlab_route(spec: RunSpec) -> dict[str, Any]:
    """`adaptlab train`: the one epoch loop, best dev epoch, test."""
    started = time.perf_counter()
    result = execute(spec, progress=False)
    return {
        "test_accuracy": result.test["accuracy"],
        "best_epoch": result.best_epoch,
        "seconds": time.perf_counter() - started,
    }


def trainer_route(spec: RunSpec) -> dict[str, Any]:
    """The same model and data under `transformers.Trainer` with adaptlab's settings."""
    started = time.perf_counter()
    objective = prepare_classification(SINGLE_LABEL, spec, torch.device("cpu"))
    config = spec.train
    train, dev = objective.features["train"], objective.features["dev"]
    per_epoch = math.ceil(len(train) / config.batch_size)
    steps = per_epoch * config.epochs
    with tempfile.TemporaryDirectory() as folder:
        args = TrainingArguments(
            folder,
            num_train_epochs=config.epochs,
            per_device_train_batch_size=config.batch_size,
            per_device_eval_batch_size=config.eval_batch_size,
            learning_rate=spec.learning_rate(),
            warmup_steps=math.ceil(config.warmup_ratio * steps),
            lr_scheduler_type="linear",
            optim="adamw_torch",
            weight_decay=config.weight_decay,
            max_grad_norm=config.max_grad_norm,
            eval_strategy="epoch",
            save_strategy="epoch",
            load_best_model_at_end=True,
            metric_for_best_model="accuracy",
            save_total_limit=2,
            seed=config.seed,
            use_cpu=True,
            report_to="none",
            disable_tqdm=True,
            logging_strategy="no",
        )
        trainer = Trainer(
            model=objective.model,
            args=args,
            train_dataset=train,
            eval_dataset=dev,
            data_collator=objective.encoder.collate,
            compute_metrics=accuracy,
            callbacks=[AdapterCheckpointCallback(objective.handle)],
        )
        trainer.train()
        best = trainer.state.best_global_step
        tested = objective.test()
    return {
        "test_accuracy": tested.metrics["accuracy"],
        "best_epoch": best // per_epoch if best else None,
        "seconds": time.perf_counter() - started,
    }


ROUTES = {"adaptlab train": adaptlab_route, "Trainer": trainer_route}


def run_one(task: tuple[str, RunSpec]) -> dict[str, Any]:
    """One route on one seed, in a process of its own (with `--jobs` beside the others)."""
    route, spec = task
    torch.set_num_threads(1)
    row = {"route": route, "seed": spec.train.seed, **ROUTES[route](spec)}
    print(json.dumps(row), flush=True)
    return row


def accuracy(prediction: EvalPrediction) -> dict[str, float]:
    logits = np.asarray(prediction.predictions)
    labels = np.asarray(prediction.label_ids)
    return {"accuracy": float((logits.argmax(-1) == labels).mean())}


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--method", default="lora")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--train-size", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=TrainConfig().epochs)
    parser.add_argument("--learning-rate", type=float, help="default: the method's")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once, one process each")
    parser.add_argument("--quick", action="store_true", help="seed 0, 64 examples, 1 epoch")
    parser.add_argument("--out", type=Path, default=None)
    options = parser.parse_args(argv)
    if options.quick:
        options.seeds, options.train_size, options.epochs = [0], 64, 1
    rate = options.learning_rate
    out = options.out or (OUT.with_name(f"{OUT.stem}_quick.json") if options.quick else OUT)
    tasks = [
        (route, spec_for(options.method, seed, options.train_size, options.epochs, rate))
        for seed in options.seeds
        for route in ROUTES
    ]
    learning_rate = tasks[0][1].learning_rate()
    with ProcessPoolExecutor(options.jobs, mp_context=get_context("spawn")) as pool:
        rows = list(pool.map(run_one, tasks))
    rows.sort(key=lambda row: (row["seed"], row["route"]))
    routes = {r: [x["test_accuracy"] for x in rows if x["route"] == r] for r in ROUTES}
    stats = {r: summary(v) for r, v in routes.items()}
    difference = stats["Trainer"]["mean"] - stats["adaptlab train"]["mean"]
    n = len(options.seeds)
    error = math.sqrt(sum(s["std"] ** 2 for s in stats.values()) / n)  # of the difference
    within = abs(difference) <= 2 * error if n > 1 else None
    print(
        f"\n{options.method} on {MODEL} / {DATA}, {options.train_size} examples, "
        f"{options.epochs} epochs, learning rate {learning_rate:g}, seeds {options.seeds}"
    )
    print(f"{'route':<16} " + " ".join(f"seed {s:<3}" for s in options.seeds) + "    mean    std")
    for route, values in routes.items():
        cells = " ".join(f"{v:8.4f}" for v in values)
        print(f"{route:<16} {cells}  {stats[route]['mean']:.4f}  {stats[route]['std']:.4f}")
    print(
        f"difference (Trainer - adaptlab train) {difference:+.4f}; 2 x its standard error "
        f"{2 * error:.4f}; within seed noise: {within}"
    )
    report = {
        "model": MODEL,
        "data": DATA,
        "method": options.method,
        "train_size": options.train_size,
        "epochs": options.epochs,
        "learning_rate": learning_rate,
        "seeds": options.seeds,
        "rows": rows,
        "summary": stats,
        "difference": difference,
        "difference_standard_error": error,
        "within_seed_noise": within,
        "torch": torch.__version__,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What transferability ranking costs: the estimators on 5000 x 768 features with 20 classes
(target for LogME: under a second), and ranking a study's candidates against fine-tuning them.

Part 1 times every estimator (median of `--repeats`) on synthetic Gaussian class features of
the size of 5,000 mean-pooled MPNet sentences with 20 classes.

Part 2 reads a study store (default `examples/transfer-validate.db`, see that spec): for each
data set, the models it fine-tuned and the wall time of each run (training, dev evaluation per
epoch and the test evaluation, as the store records it). It then ranks the same models on the
same data from scratch (no feature cache) on the study's training examples (and on `--sample`
examples if given), as `adaptlab rank` does by default (features of every layer, all seven
estimators on the last layer), and reports ranking time / fine-tuning time, with the ranking
split into model loading plus feature extraction, and scoring.
Both parts run in this one process, with the same torch threads.

Usage (from the repository root)::

    .venv/bin/python benchmarks/transferability.py                 # a few minutes
    .venv/bin/python benchmarks/transferability.py --store my.db --sample 1000
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

import adaptlab
from adaptlab.data import load_dataset
from adaptlab.select import ESTIMATORS, FeatureOptions, make_estimators, parse_candidate, rank
from adaptlab.study.store import load_records
from adaptlab.tasks.registry import LABELLED

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "transferability.json"
DEFAULT_STORE = BENCH_DIR.parent / "examples" / "transfer-validate.db"
console = Console(width=120)


def synthetic(n: int, d: int, classes: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian classes in d dimensions, float32 as extracted features are."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % classes
    centres = rng.normal(size=(classes, d))
    return (centres[labels] * 0.3 + rng.normal(size=(n, d))).astype(np.float32), labels


def time_estimators(n: int, d: int, classes: int, repeats: int) -> dict[str, dict[str, float]]:
    """Median and min seconds of each estimator's fit on one n x d feature matrix."""
    x, y = synthetic(n, d, classes)
    out = {}
    for make in ESTIMATORS:
        estimator = make()
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            estimator.fit(x, y)
            seconds.append(time.perf_counter() - start)
        out[make.name] = {"median_s": statistics.median(seconds), "min_s": min(seconds)}
    return out


def fine_tuning_cost(store: Path) -> dict[str, dict[str, Any]]:
    """Per data set: each model's fine-tuning wall seconds, train size, seed and token length."""
    by_data: dict[str, dict[str, Any]] = defaultdict(lambda: {"models": {}})
    for stored in load_records(store):
        result, spec = stored.result, stored.result.spec
        entry = by_data[result.data.name]
        entry["models"][spec.model] = result.wall_seconds
        entry["train_size"] = spec.train_size
        entry["seed"] = spec.train.seed
        entry["max_length"] = spec.train.max_length
    return dict(by_data)


def ranking_seconds(
    models: list[str], data: str, sample: int, seed: int, length: int
) -> dict[str, float]:
    """Seconds to rank `models` from scratch as `adaptlab rank` does by default (load, extract
    every layer, all estimators on the last layer): in all, extracting, scoring."""
    dataset = load_dataset(data, LABELLED)
    options = FeatureOptions(
        sample=sample, seed=seed, max_length=length, use_cache=False, progress=False
    )
    candidates = [parse_candidate(model) for model in models]
    start = time.perf_counter()
    ranking = rank(candidates, dataset, make_estimators("all"), options=options)
    return {
        "rank_seconds": time.perf_counter() - start,
        "extract_seconds": ranking.extract_seconds,
        "score_seconds": ranking.score_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=DEFAULT_STORE)
    parser.add_argument("--sample", type=int, help="also rank on this many examples")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    timings = time_estimators(5000, 768, 20, args.repeats)
    table = Table(title="estimators on 5000 x 768 features, 20 classes")
    for column in ("estimator", "median s", "min s"):
        table.add_column(column, justify="left" if column == "estimator" else "right")
    for name, seconds in timings.items():
        table.add_row(name, f"{seconds['median_s']:.3f}", f"{seconds['min_s']:.3f}")
    console.print(table)

    costs = []
    if args.store.is_file():
        for data, entry in fine_tuning_cost(args.store).items():
            models = list(entry["models"])
            tuned = sum(entry["models"].values())
            for sample in dict.fromkeys(s for s in (entry["train_size"], args.sample) if s):
                seconds = ranking_seconds(models, data, sample, entry["seed"], entry["max_length"])
                costs.append(
                    {
                        "data": data,
                        "models": models,
                        "sample": sample,
                        "fine_tune_seconds": tuned,
                        **seconds,
                        "share": seconds["rank_seconds"] / tuned,
                    }
                )
        table = Table(title=f"ranking vs fine-tuning each candidate once ({args.store.name})")
        for column in (
            "data",
            "candidates",
            "examples",
            "rank s",
            "extract s",
            "score s",
            "fine-tune s",
            "share",
        ):
            table.add_column(column, justify="left" if column == "data" else "right")
        for cost in costs:
            table.add_row(
                cost["data"],
                str(len(cost["models"])),
                str(cost["sample"]),
                f"{cost['rank_seconds']:.1f}",
                f"{cost['extract_seconds']:.1f}",
                f"{cost['score_seconds']:.1f}",
                f"{cost['fine_tune_seconds']:.1f}",
                f"{cost['share']:.1%}",
            )
        console.print(table)
    else:
        console.print(f"no study store at {args.store}: ranking cost not measured")

    result = {
        "estimators_5000x768x20": timings,
        "ranking_vs_fine_tuning": costs,
        "store": str(args.store),
        "environment": {
            "adaptlab": adaptlab.__version__,
            "torch": torch.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
            "torch_threads": torch.get_num_threads(),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

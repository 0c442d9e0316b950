"""The nice-10 goals of `contention.py` measured in pairs: each of adaptlab's step loops alone
and then beside a nice-10 neighbour, one right after the other, `--rounds` times (the order
turned every other round), so that the machine's own drift (its speed alone moves by 10-30%
between minutes here) falls on both sides of each ratio. The slowdown of a round is the loop's
steps per second alone over its steps per second beside; the goal (at most 1.3x) is judged on
the median round. Each side also records how many CPUs' worth the loop ran on (its CPU time
over its wall time): beside a neighbour, what the scheduler left it. The neighbours and the
step loops are `contention.py`'s.

Usage (from the repository root, about 17 minutes with the defaults; nothing else should run
meanwhile)::

    .venv/bin/python benchmarks/contention_paired.py
    .venv/bin/python benchmarks/contention_paired.py --rounds 2 --seconds 8 --workload houlsby
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from statistics import median
from typing import Any

from contention import (
    ADAPTLAB_WORKLOADS,
    HERE,
    LIMITS,
    NICE_LIMIT,
    autogroup,
    prepare_mix,
    scenarios,
    slowdown,
    step_loop,
)
from contention_neighbours import Neighbours, running
from report_file import heading, write_json

OUT = HERE / "results" / "contention_paired.json"
NICE_NEIGHBOURS = tuple(name for name, limit in LIMITS.items() if limit == NICE_LIMIT)


def paired_rounds(
    workload: str, start: Callable[[], Neighbours], rounds: int, seconds: float
) -> list[dict[str, Any]]:
    """`rounds` pairs of adaptlab's `workload` loop alone and beside the neighbour `start`
    starts."""
    found = []
    for number in range(rounds):
        sides: dict[str, dict[str, Any]] = {}
        for side in ("alone", "beside") if number % 2 == 0 else ("beside", "alone"):
            with running(start) if side == "beside" else nullcontext():
                sides[side] = step_loop(workload, "adaptlab", seconds)
        alone, beside = (sides[s]["steps_per_second"] for s in ("alone", "beside"))
        found.append(
            {
                "alone": alone,
                "beside": beside,
                "slowdown": slowdown(alone, beside),
                "cpus_held_alone": cpus_held(sides["alone"]),
                "cpus_held_beside": cpus_held(sides["beside"]),
            }
        )
    return found


def cpus_held(result: dict[str, Any]) -> float | None:
    """How many CPUs' worth the loop ran on in its window (its CPU time over wall time): what
    the scheduler gave it, apart from how fast each CPU second went."""
    if result.get("steps_per_second") is None:
        return None
    return float(result["cpu_seconds"] / result["seconds"])


def judged(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The median round's slowdown against the goal (a round that timed out counts as failed)."""
    ratios = [r["slowdown"] for r in rounds]
    value = None if None in ratios else median(ratios)
    held = [r["cpus_held_beside"] for r in rounds if r["cpus_held_beside"] is not None]
    return {
        "median": value,
        "cpus_held_beside": median(held) if held else None,
        "range": [min(ratios), max(ratios)] if value is not None else None,
        "limit": f"<= {NICE_LIMIT}",
        "passes": value is not None and value <= NICE_LIMIT,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="pairs per loop and neighbour")
    parser.add_argument("--seconds", type=float, default=12.0, help="each loop's timed window")
    parser.add_argument("--workload", choices=ADAPTLAB_WORKLOADS, action="append")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    workloads = args.workload or list(ADAPTLAB_WORKLOADS)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="adaptlab-contention-") as scratch:
        registry, texts = prepare_mix(Path(scratch))
        starts = scenarios(registry, texts)
        for neighbour in NICE_NEIGHBOURS:
            for workload in workloads:
                print(f"{workload} beside {neighbour}", flush=True)
                rounds = paired_rounds(workload, starts[neighbour], args.rounds, args.seconds)
                results[f"{workload} beside {neighbour}"] = {
                    "rounds": rounds,
                    **judged(rounds),
                }
    for name, found in results.items():
        value = "none" if found["median"] is None else f"{found['median']:.2f}x"
        spread = "" if found["range"] is None else "{:.2f}-{:.2f}".format(*found["range"])
        verdict = "pass" if found["passes"] else "FAIL"
        held = found["cpus_held_beside"]
        cpus = "" if held is None else f", {held:.2f} CPUs held beside"
        print(f"{name:45s} {value:>7s} ({spread}{cpus}) {found['limit']} {verdict}")
    record = {
        **heading("contention_paired"),
        "settings": {"rounds": args.rounds, "seconds": args.seconds, "autogroup": autogroup()},
        "results": results,
    }
    write_json(record, args.out)


if __name__ == "__main__":
    main()

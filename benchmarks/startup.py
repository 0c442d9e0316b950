"""Start-up time: `adaptlab --help` and `python -c "import adaptlab.report"`, before and after
the package faces became lazy (target: `adaptlab --help` under 0.5 s).

Before: the sources of `--previous` (default 69ee686, the last commit whose faces imported
everything), extracted with `git archive` into benchmarks/.previous-<rev> and put first on
PYTHONPATH; after: today's tree. Both run in this virtual environment, each command in a fresh
process, interleaved (every round runs each case once, odd rounds in reverse order, after one
untimed warm-up of each so that both read files from a warm page cache). The figure is the
median wall time over the rounds. Beside it: the modules the command imports (`-X importtime`
lines, one untimed run) and, per timed run, the CPU time other processes used meanwhile (from
/proc/stat), which says how busy the machine was.

Usage (from the repository root)::

    .venv/bin/python benchmarks/startup.py                # about a minute
    .venv/bin/python benchmarks/startup.py --nice -20     # on a busy shared machine (root)
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from methods_step import wait_for_quiet
from previous import previous_sources
from report_file import heading, write_json
from step_harness import system_busy_seconds
from step_worker import set_priority

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "startup.json"
PREVIOUS = "69ee686"
"""The last commit whose package faces imported every module (and so torch)."""
HELP_TARGET_S = 0.5
CASES = {
    "adaptlab --help": [str(Path(sys.executable).parent / "adaptlab"), "--help"],
    "import adaptlab.report": [sys.executable, "-c", "import adaptlab.report"],
}


def run_once(command: list[str], pythonpath: str | None, nice: int) -> dict[str, float]:
    """Wall time of `command` in a fresh process, and the CPU time others used meanwhile."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    busy, cpu = system_busy_seconds(), children_cpu_seconds()
    started = time.perf_counter()
    done = subprocess.run(
        command,
        env=env,
        capture_output=True,
        check=False,
        start_new_session=nice != 0,  # its own autogroup, whose nice it sets
        preexec_fn=(lambda: set_priority(nice)) if nice else None,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr[-400:]!r}")
    own = children_cpu_seconds() - cpu
    return {"seconds": seconds, "foreign_cpu_s": max(0.0, system_busy_seconds() - busy - own)}


def children_cpu_seconds() -> float:
    """CPU time (user + system) of this process's finished children so far."""
    usage = os.times()
    return usage.children_user + usage.children_system


def module_count(command: list[str], pythonpath: str | None) -> int:
    """How many modules `command` imports (lines of `-X importtime`, header left out)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPROFILEIMPORTTIME"] = "1"
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    return sum(1 for line in done.stderr.splitlines() if line.startswith("import time:")) - 1


def measure(
    rounds: int, versions: dict[str, str | None], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Interleaved timed runs of every (case, version); one row each."""
    keys = [(case, version) for case in CASES for version in versions]
    runs: dict[tuple[str, str], list[dict[str, float]]] = {key: [] for key in keys}
    for case, version in keys:  # warm-up: file caches filled for both versions
        run_once(CASES[case], versions[version], args.nice)
    for r in range(rounds):
        for case, version in keys if r % 2 == 0 else reversed(keys):
            if args.nice >= 0:
                wait_for_quiet(args.max_wait)
            runs[case, version].append(run_once(CASES[case], versions[version], args.nice))
        print(f"round {r + 1}/{rounds} done", flush=True)
    return [
        {
            "case": case,
            "version": version,
            "median_s": statistics.median(run["seconds"] for run in runs[case, version]),
            "modules": module_count(CASES[case], versions[version]),
            "runs": runs[case, version],
        }
        for case, version in keys
    ]


def format_table(rows: list[dict[str, Any]], previous: str) -> str:
    """One line per case: median seconds and modules before and after, and their ratio."""
    found = {(row["case"], row["version"]): row for row in rows}
    lines = [
        f"{'case':<24}{'before s':>10}{'after s':>10}{'after/before':>14}"
        f"{'modules before':>16}{'after':>7}",
    ]
    for case in CASES:
        before, after = found[case, "before"], found[case, "after"]
        lines.append(
            f"{case:<24}{before['median_s']:>10.3f}{after['median_s']:>10.3f}"
            f"{after['median_s'] / before['median_s']:>14.3f}"
            f"{before['modules']:>16}{after['modules']:>7}"
        )
    foreign = [run["foreign_cpu_s"] for row in rows for run in row["runs"]]
    lines.append(
        f"before = git {previous}; median of the timed runs; other processes' CPU time per run: "
        f"median {statistics.median(foreign):.2f} s, max {max(foreign):.2f} s"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table and the target, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--previous", default=PREVIOUS, help=f"git revision (default {PREVIOUS})")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--nice", type=int, default=0, help="niceness of each run (-20: root)")
    parser.add_argument("--max-wait", type=float, default=30.0, help="seconds to wait for quiet")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    versions = {"before": str(previous_sources(args.previous)), "after": None}
    load_before = os.getloadavg()
    rows = measure(args.rounds, versions, args)
    help_after = next(r for r in rows if r["case"] == "adaptlab --help" and r["version"] == "after")
    passed = help_after["median_s"] < HELP_TARGET_S
    table = format_table(rows, args.previous)
    target = (
        f"{'PASS' if passed else 'FAIL'}  adaptlab --help after: {help_after['median_s']:.3f} s "
        f"(target < {HELP_TARGET_S} s)"
    )
    print(f"{table}\n{target}")
    report = {
        **heading("startup"),
        "settings": {**vars(args), "out": str(args.out)},
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
        "environments": {
            "before": {"adaptlab sources": f"git {args.previous}", "path": versions["before"]},
            "after": {"adaptlab sources": "working tree"},
        },
        "rows": rows,
        "checks": [
            {
                "name": "adaptlab --help after (s)",
                "value": help_after["median_s"],
                "limit": HELP_TARGET_S,
                "pass": passed,
            }
        ],  # fmt: skip
        "table": f"{table}\n{target}",
    }
    write_json(report, args.out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A run beside other work: how much slower each step loop goes next to each kind of neighbour,
with adaptlab's thread choice (`adaptlab.threads`) against torch's defaults (how adaptlab ran
before, and how a plain PyTorch loop and TRL's `SFTTrainer` run), in one run.

Each step loop runs in a fresh process (`contention_worker.py`: its threads are set before its
torch loads, and adaptlab's loops tick the thread governor after each step, as its training
loop does) for a window of `--seconds` after two warm-up steps; the figure is steps per second.
The neighbours (`contention_neighbours.py`), each in a session of its own: none (quiet), one
busy thread at nice 0 and at nice 10, a PyTorch program at its defaults at nice 0 and nice 10,
and the mix at nice 10 (an `adaptlab serve` answering a client and short `adaptlab predict`
commands one after another, all at torch's defaults). A neighbour at nice 10 has its session's
scheduling group (autogroup) at nice 10 too: otherwise the kernel weighs it as nice 0 against
every other session. Quiet is measured in three rounds, two
first and one last, since this machine's speed alone moves by 10-30% between minutes; a loop's
speed alone is their mean. The slowdown is the time a step takes beside the neighbour over
its time alone.

Then a cgroup that allows one CPU (v2 `cpu.max` where the machine's cgroup v2 has the cpu
controller, else v1 `cpu.cfs_quota_us`; skipped, and said so, where neither can be made): the
step loops with adaptlab's choice (it reads the quota) against one thread set by hand and
torch's defaults (as many threads as cores, throttled).

Goals: beside one busy thread at nice 0 at most 2.2x the time alone (the fair share of two
cores is 2x); beside every nice-10 neighbour at most 1.3x; in the one-CPU cgroup at most 1.1x
the time of one thread set by hand; quiet, at least 0.95x the steps per second of torch's
defaults.

Usage (from the repository root, about 40 minutes; nothing else should run meanwhile)::

    .venv/bin/python benchmarks/contention.py
    .venv/bin/python benchmarks/contention.py --seconds 10 --quick   # houlsby alone
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from statistics import mean
from typing import Any

from contention_neighbours import (
    PYTHON,
    Neighbours,
    adaptlab_mix,
    busy_thread,
    running,
    torch_defaults,
    torch_program,
)
from report_file import heading, write_json

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "contention.json"
WORKER = HERE / "contention_worker.py"
WORKER_TIMEOUT = 900

VARIANTS = (
    ("houlsby", "adaptlab"),
    ("houlsby", "default"),
    ("lora-sft", "adaptlab"),
    ("lora-sft", "default"),
    ("plain", "adaptlab"),
    ("plain", "default"),
    ("trl", "default"),
)
"""(workload, settings) of every step loop; `adaptlab` settings are what the goals judge."""
QUICK = (("houlsby", "adaptlab"), ("houlsby", "default"))
IN_CGROUP = ("adaptlab", "one-thread", "default")
ADAPTLAB_WORKLOADS = ("houlsby", "lora-sft")

FAIR_SHARE_LIMIT = 2.2
NICE_LIMIT = 1.3
CGROUP_LIMIT = 1.1
QUIET_FLOOR = 0.95

Results = dict[str, dict[str, Any]]
"""Each neighbour's results: each loop's (`workload/settings`) worker result."""


def scenarios(registry: Path, texts: Path) -> dict[str, Callable[[], Neighbours]]:
    """Each neighbour, by name, with what starts it."""
    return {
        "quiet": list,
        "quiet, second round": list,
        "busy thread, nice 0": lambda: busy_thread(0),
        "busy thread, nice 10": lambda: busy_thread(10),
        "PyTorch program, nice 0": lambda: torch_program(0),
        "PyTorch program, nice 10": lambda: torch_program(10),
        "adaptlab mix, nice 10": lambda: adaptlab_mix(registry, texts, 8765),
        "quiet, last round": list,
    }


def step_loop(
    workload: str, settings: str, seconds: float, join: Path | None = None
) -> dict[str, Any]:
    """One worker's result (`contention_worker.py`), started at torch's defaults (one thread by
    hand for `one-thread`), inside the cgroup folder `join` if given."""
    environment = torch_defaults() | ({"OMP_NUM_THREADS": "1"} if settings == "one-thread" else {})
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "result.json"
        command = [PYTHON, str(WORKER), "--workload", workload, "--settings", settings]
        command += ["--seconds", str(seconds), "--out", str(out)]

        def enter_cgroup() -> None:  # in the child, before python starts
            if join is not None:
                (join / "cgroup.procs").write_text(str(os.getpid()))

        try:
            subprocess.run(
                command,
                env=environment,
                check=True,
                capture_output=True,
                timeout=WORKER_TIMEOUT,
                preexec_fn=enter_cgroup,
            )
        except subprocess.TimeoutExpired:
            return {"timed_out": WORKER_TIMEOUT, "steps_per_second": None}
        except subprocess.CalledProcessError as failed:
            raise RuntimeError(f"{workload}/{settings}: {failed.stderr.decode()[-2000:]}") from None
        result: dict[str, Any] = json.loads(out.read_text())
    print(
        f"  {workload:9s} {settings:10s} {result['steps_per_second']:8.3f} steps/s "
        f"({result['threads']} threads, {result['wait_policy']})",
        flush=True,
    )
    return result


def prepare_mix(folder: Path) -> tuple[Path, Path]:
    """A registry with one MiniLM LoRA adapter (`rt`) for the mix's server and commands, and a
    file of texts for its `predict` commands."""
    registry, texts = folder / "registry", folder / "texts.txt"
    texts.write_text("a gorgeous, witty film\na dull mess\n" * 8)
    subprocess.run(
        [
            PYTHON,
            "-m",
            "adaptlab",
            "train",
            "--model",
            "minilm-l6",
            "--data",
            "rotten-tomatoes",
            "--method",
            "lora",
            "--train-size",
            "32",
            "--epochs",
            "1",
            "--max-length",
            "64",
            "--out",
            str(registry / "rt"),
            "--no-progress",
        ],  # fmt: skip
        check=True,
        capture_output=True,
    )
    return registry, texts


@contextmanager
def one_cpu_cgroup() -> Iterator[tuple[Path | None, str]]:
    """A cgroup allowing one CPU's time per period, and what it is; (None, why) where this
    machine does not let one be made. Removed afterwards."""
    v2, v1 = Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/cpu")
    controllers = v2 / "cgroup.controllers"
    folder: Path | None = None
    try:
        if controllers.exists() and "cpu" in controllers.read_text().split():
            folder = v2 / "adaptlab-contention"
            folder.mkdir(exist_ok=True)
            (folder / "cpu.max").write_text("100000 100000\n")
            what = "cgroup v2, cpu.max = 100000 100000"
        elif (v1 / "cpu.cfs_quota_us").exists():
            folder = v1 / "adaptlab-contention"
            folder.mkdir(exist_ok=True)
            (folder / "cpu.cfs_period_us").write_text("100000\n")
            (folder / "cpu.cfs_quota_us").write_text("100000\n")
            what = (
                "cgroup v1, cpu.cfs_quota_us = cpu.cfs_period_us = 100000 (this machine's cgroup "
                "v2 hierarchy has no cpu controller: the cpu controller is mounted as v1)"
            )
        else:
            what = "no cgroup: neither a v2 cpu controller nor a v1 cpu hierarchy is mounted"
    except OSError as error:
        folder, what = None, f"no cgroup: this machine refused one ({error})"
    try:
        yield folder, what
    finally:
        if folder is not None and folder.exists():
            folder.rmdir()


def slowdown(alone: float | None, beside: float | None) -> float | None:
    """A step's time beside a neighbour over its time alone."""
    return None if not alone or not beside else alone / beside


def judge(results: Results, cgroup: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal for each of adaptlab's step loops: the figure, the limit, whether it passes."""
    goals: list[dict[str, Any]] = []
    for workload in ADAPTLAB_WORKLOADS:
        ours, before = f"{workload}/adaptlab", f"{workload}/default"
        if mean_speed(results, ours) is None:
            continue
        alone = mean_speed(results, ours)
        quiet = slowdown(alone, mean_speed(results, before))  # its speed over today's
        goals.append(_goal(workload, "quiet: steps/s over torch's defaults", quiet, QUIET_FLOOR))
        for neighbour, limit in LIMITS.items():
            if neighbour not in results:
                continue
            beside = results.get(neighbour, {}).get(ours, {}).get("steps_per_second")
            ratio = slowdown(alone, beside)
            goals.append(_goal(workload, f"beside {neighbour}: slowdown", ratio, limit, upper=True))
        if workload in cgroup["loops"]:
            loops = cgroup["loops"][workload]
            ratio = slowdown(*(loops[s]["steps_per_second"] for s in ("one-thread", "adaptlab")))
            what = "1-CPU cgroup: time over 1 thread by hand"
            goals.append(_goal(workload, what, ratio, CGROUP_LIMIT, upper=True))
    return goals


LIMITS = {
    "busy thread, nice 0": FAIR_SHARE_LIMIT,
    "busy thread, nice 10": NICE_LIMIT,
    "PyTorch program, nice 10": NICE_LIMIT,
    "adaptlab mix, nice 10": NICE_LIMIT,
}
"""The neighbours with a goal, and its limit; a PyTorch program at nice 0 has none (two programs
of two threads each on two cores: the table reports it)."""


def mean_speed(results: Results, loop: str) -> float | None:
    """A loop's steps per second alone: the mean of the quiet rounds."""
    found = [
        found[loop]["steps_per_second"]
        for neighbour, found in results.items()
        if neighbour.startswith("quiet") and found.get(loop, {}).get("steps_per_second")
    ]
    return mean(found) if found else None


def _goal(
    workload: str, what: str, value: float | None, limit: float, upper: bool = False
) -> dict[str, Any]:
    passes = value is not None and (value <= limit if upper else value >= limit)
    return {
        "workload": workload,
        "goal": what,
        "value": value,
        "limit": f"<= {limit}" if upper else f">= {limit}",
        "passes": passes,
    }


def table(results: Results, loops: tuple[tuple[str, str], ...]) -> str:
    """Each loop's slowdown beside each neighbour (its time beside over its time alone)."""
    names = [f"{w}/{s}" for w, s in loops]
    lines = ["| neighbour | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for neighbour, found in results.items():
        cells = []
        for name in names:
            speed = found.get(name, {}).get("steps_per_second")
            if neighbour.startswith("quiet"):
                cells.append("-" if speed is None else f"{speed:.3f} steps/s")
            else:
                ratio = slowdown(mean_speed(results, name), speed)
                cells.append("timed out" if ratio is None else f"{ratio:.2f}x")
        lines.append(f"| {neighbour} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def autogroup() -> str:
    """Whether the kernel schedules each session as a group (so a neighbour's nice is set on
    its session's group too: `contention_neighbours.start`)."""
    switch = Path("/proc/sys/kernel/sched_autogroup_enabled")
    if not switch.exists():
        return "not in this kernel"
    return "on" if switch.read_text().strip() == "1" else "off"


def beside_neighbours(loops: tuple[tuple[str, str], ...], seconds: float) -> Results:
    """Every loop with each neighbour of `scenarios` running beside it."""
    results: Results = {}
    with tempfile.TemporaryDirectory(prefix="adaptlab-contention-") as scratch:
        registry, texts = prepare_mix(Path(scratch))
        for neighbour, neighbours in scenarios(registry, texts).items():
            print(neighbour, flush=True)
            with running(neighbours):
                results[neighbour] = {f"{w}/{s}": step_loop(w, s, seconds) for w, s in loops}
    return results


def quiet_rounds(rounds: int, loops: tuple[tuple[str, str], ...], seconds: float) -> Results:
    """Every loop alone, `rounds` times, in the opposite order every other round."""
    results: Results = {}
    for number in range(1, rounds + 1):
        print(f"quiet, round {number}", flush=True)
        ordered = loops if number % 2 else loops[::-1]
        results[f"quiet, round {number}"] = {
            f"{w}/{s}": step_loop(w, s, seconds) for w, s in ordered
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0, help="each loop's timed window")
    parser.add_argument("--quick", action="store_true", help="the Houlsby loop alone")
    parser.add_argument(
        "--quiet-only",
        type=int,
        metavar="ROUNDS",
        help="only adaptlab's loops and torch's defaults alone, in ROUNDS rounds, the order "
        "turned each round (the quiet goal, judged on more rounds than the full run has)",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    loops = QUICK if args.quick else VARIANTS
    if args.quiet_only:
        loops = tuple((w, s) for w in ADAPTLAB_WORKLOADS for s in ("adaptlab", "default"))
        results = quiet_rounds(args.quiet_only, loops, args.seconds)
    else:
        results = beside_neighbours(loops, args.seconds)
    cgroup: dict[str, Any] = {"loops": {}}
    with one_cpu_cgroup() as (folder, what):
        print(what, flush=True)
        cgroup |= {"folder": str(folder) if folder else None, "what": what}
        workloads = sorted({w for w, _ in loops if w in ADAPTLAB_WORKLOADS})
        for workload in workloads if folder and not args.quiet_only else ():
            cgroup["loops"][workload] = {
                s: step_loop(workload, s, args.seconds, folder) for s in IN_CGROUP
            }
    goals = judge(results, cgroup)
    print(table(results, loops))
    for goal in goals:
        value = "none" if goal["value"] is None else f"{goal['value']:.3f}"
        verdict = "pass" if goal["passes"] else "FAIL"
        print(f"{goal['workload']:9s} {goal['goal']:50s} {value:>7s} {goal['limit']:>7s} {verdict}")
    record = {
        **heading("contention"),
        "settings": {
            "seconds": args.seconds,
            "cores": os.cpu_count(),
            "loops": loops,
            "autogroup": autogroup(),
        },
        "results": results,
        "cgroup": cgroup,
        "goals": goals,
        "table": table(results, loops),
    }
    write_json(record, args.out)


if __name__ == "__main__":
    main()

"""Training-step time of every continual-learning strategy, as a ratio to `sequential`, and the
one-off costs some strategies pay at a stage's start or end (the distillation teacher, the
Fisher information).

Model: MiniLM-L6 (adaptlab's built-in `minilm-l6`) through adaptlab's own continual code: one
head per stage (`StageHeads`), the stage's adapter added and trained as `adaptlab sequence`
does, each stage trained by `train_stage` with its defaults (AdamW, linear schedule, gradient
clipping, dev evaluation). Data: two in-memory stages of random token sequences (16 x 128 by
default, full attention mask) with random binary labels. The first stage trains `--first-batches`
steps, so that the second stage has something to replay, distil or hold on to; the second
stage's steps are the ones timed. Every registered strategy runs with its default options, with
each method of `--methods` (default houlsby and lora, their default options); torch uses 2
intra-op threads and 1 inter-op thread.

Step time ("step ms"): a step is what `train_stage` does between two training-mode forward
passes of the model (a forward pre-hook marks each one): choosing the batch and the replayed
examples, collating, forward, the strategy's penalty, backward, clipping, AdamW and the
scheduler. The step before an evaluation-mode forward (the dev evaluation) is not timed; the
first `--warmup` steps are dropped. Steps during which other processes used more than 10% of
the machine are contended and dropped (as in `methods_step.py`); rows that still had to use
contended steps are marked `*`. The figure is the median over the clean steps of every round;
the ratio is to `sequential` with the same method.

One-off costs, timed separately from the steps:

- at the second stage's start, the strategy's `begin`: for `kd-logit`, `kd-representation` and
  `kd-contrastive` the teacher (the model as the stage begins) runs once over the stage's
  training examples in evaluation mode, without gradient, and its outputs are cached, so no
  step runs a teacher; reported per training example, with the cache's size;
- at the first stage's end, the strategy's `end`: for `ewc` the diagonal Fisher, one forward
  and backward pass per sampled example; reported per example.

From these rates the table projects the share of one-off work in a stage of
`--project-examples` examples trained `--project-epochs` epochs (arithmetic on the measured
rates, dev evaluation left out), and that stage's time as a ratio to `sequential`'s.

Each configuration runs in its own fresh process; rounds are interleaved (odd rounds in reverse
order) and configurations left with too few clean steps are measured again.

Usage (from the repository root)::

    .venv/bin/python benchmarks/continual_step.py                  # houlsby and lora, 3 rounds
    .venv/bin/python benchmarks/continual_step.py --nice -20       # on a busy shared machine
    .venv/bin/python benchmarks/continual_step.py --methods houlsby --rounds 5
    .venv/bin/python benchmarks/continual_step.py --quick --out /tmp/continual_step.json
        # a tiny random BERT, 1 round of 3 steps: checks that the script runs, measures nothing
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import math
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from methods_step import (
    CORES,
    FOREIGN_CPU_LIMIT,
    add_worker_options,
    clean_steps,
    failed_line,
    interleave,
    step_summary,
    wait_for_quiet,
    worker_env,
    worker_result,
)
from report_file import heading, write_json
from step_harness import configure_threads, make_batch, system_busy_seconds
from step_worker import set_priority
from torch import nn

import adaptlab
from adaptlab.continual import SequenceSpec, StageHeads, list_strategies, make_strategy
from adaptlab.continual.labelled_run import StageData, StageRun
from adaptlab.continual.stage_loop import train_stage
from adaptlab.continual.stages import use_stage_adapter
from adaptlab.continual.strategy import Strategy
from adaptlab.data import TextEncoder
from adaptlab.errors import ConfigError
from adaptlab.methods.compose import resolve
from adaptlab.models.loading import load_model
from adaptlab.records.config import TrainConfig
from adaptlab.tasks.registry import get_task

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "continual_step.json"
MODEL = "minilm-l6"
BASELINE = "sequential"
LABELS = ("negative", "positive")
WORKER_TIMEOUT = 900


@dataclass(frozen=True)
class Config:
    """One configuration: a strategy (default options) with a method (default options)."""

    method: str
    strategy: str

    @property
    def key(self) -> str:
        return f"{self.method}:{self.strategy}"


# ---------------------------------------------------------------------------------------------
# Worker: one configuration in this process
# ---------------------------------------------------------------------------------------------


class StepClock:
    """A forward pre-hook timing the training steps of `train_stage`.

    A step lasts from one training-mode forward of the model to the next. An evaluation-mode
    forward (the dev evaluation after an epoch) ends the chain: the step before it is not
    timed. Each timed step also records the CPU time other processes used meanwhile.
    """

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.foreign: list[float] = []
        self._last: tuple[float, float, float] | None = None

    def __call__(self, module: nn.Module, args: Any) -> None:
        now = (time.perf_counter(), time.process_time(), system_busy_seconds())
        if module.training and self._last is not None:
            wall, cpu, busy = (b - a for a, b in zip(self._last, now, strict=True))
            self.wall.append(wall)
            self.foreign.append(max(0.0, busy - cpu))
        self._last = now if module.training else None


@contextlib.contextmanager
def stopwatch(times: list[dict[str, float]]) -> Iterator[None]:
    """Append the block's wall seconds, and the CPU seconds other processes used meanwhile."""
    busy, cpu, wall = system_busy_seconds(), time.process_time(), time.perf_counter()
    yield
    own = time.process_time() - cpu
    foreign = max(0.0, system_busy_seconds() - busy - own)
    times.append({"seconds": time.perf_counter() - wall, "foreign_cpu": foreign})


def random_stage(
    name: str, encoder: TextEncoder, vocab: int, length: int, sizes: tuple[int, int], seed: int
) -> StageData:
    """A stage of random token sequences of `length` tokens with random labels: `sizes` =
    (train, dev) examples; the test split is the dev split (only training is measured)."""
    train, dev = sizes
    batch = make_batch(vocab, train + dev, length, seed)
    rows = [
        {"input_ids": ids.tolist(), "attention_mask": [1] * length, "labels": int(label)}
        for ids, label in zip(batch["input_ids"], batch["labels"], strict=True)
    ]
    return StageData(name, LABELS, encoder, rows[:train], rows[train:], rows[train:])


def cache_bytes(strategy: Strategy) -> int:
    """Bytes of the teacher outputs a distillation strategy cached (0 for the others)."""
    teacher = getattr(strategy, "teacher", None)
    tensors = teacher if isinstance(teacher, list) else [teacher]
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def run_worker(config: dict[str, Any]) -> dict[str, Any]:
    """Train the first stage briefly, then time the second stage's steps and one-off costs."""
    priority = set_priority(config["nice"]) if config["nice"] else None
    configure_threads(config["threads"])
    batch_size, seed, length = config["batch_size"], config["seed"], config["seq_len"]
    train = TrainConfig(epochs=1, batch_size=batch_size, max_length=length, seed=seed)
    spec = SequenceSpec.build(
        config["model"], ("first", "second"), config["method"], config["strategy"], train=train
    )
    loaded = load_model(spec.model, "single_label", label_names=LABELS, seed=seed)
    model = loaded.model
    heads = StageHeads.install(model, [len(LABELS), len(LABELS)], seed)
    encoder = TextEncoder(loaded.tokenizer, get_task("single_label"), len(LABELS), length)
    vocab = int(getattr(model, "config").vocab_size)  # noqa: B009 (untyped attribute)
    first_size = batch_size * config["first_batches"]
    second_size = batch_size * (config["warmup"] + config["steps"] + 1)
    stages = [
        random_stage("first", encoder, vocab, length, (first_size, batch_size), seed),
        random_stage("second", encoder, vocab, length, (second_size, batch_size), seed + 1),
    ]
    strategy = make_strategy(spec.strategy)
    ends: list[dict[str, float]] = []
    end = strategy.end

    def timed_end(run: StageRun) -> None:
        with stopwatch(ends):
            end(run)

    strategy.end = timed_end  # type: ignore[method-assign]

    def stage_run(index: int) -> StageRun:
        """Stage `index` made ready as `adaptlab sequence` does: its adapter and head train."""
        use_stage_adapter(model, strategy.adapter_name(index), spec.methods, seed + index)
        heads.select(index)
        heads.train_only(index)
        return StageRun(model, stages, index, spec.train.eval_batch_size, heads=heads, seed=seed)

    learning_rate = spec.learning_rate()
    first = stage_run(0)
    strategy.begin(first)
    first_history = train_stage(first, strategy, spec.train, learning_rate, progress=False)
    second = stage_run(1)
    begins: list[dict[str, float]] = []
    with stopwatch(begins):
        strategy.begin(second)
    clock = StepClock()
    hook = model.register_forward_pre_hook(clock)
    try:
        history = train_stage(second, strategy, spec.train, learning_rate, progress=False)
    finally:
        hook.remove()
    warmup = config["warmup"]
    return {
        **config,
        "method_config": [c.to_dict() for c in spec.methods],
        "strategy_config": spec.strategy.to_dict(),
        "learning_rate": learning_rate,
        "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "stage_sizes": [len(stage.train) for stage in stages],
        "train_loss": [first_history.epochs[-1].train_loss, history.epochs[-1].train_loss],
        "measurement": {
            "step_seconds": clock.wall[warmup:],
            "step_foreign_cpu": clock.foreign[warmup:],
            "warmup_seconds": clock.wall[:warmup],
        },
        "begin": begins[0],
        "cache_bytes": cache_bytes(strategy),
        "first_end": ends[0],
        "adaptlab": str(Path(adaptlab.__file__).parent),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "priority": priority,
    }


# ---------------------------------------------------------------------------------------------
# Orchestration
# ---------------------------------------------------------------------------------------------


def measure_once(config: Config, settings: dict[str, Any], nice: int) -> dict[str, Any]:
    """Run `config` once in a fresh process; its result, or {'error': ...}."""
    with tempfile.TemporaryDirectory(prefix="continual_step_") as tmp:
        out = Path(tmp) / "result.json"
        job = {**settings, "method": config.method, "strategy": config.strategy, "nice": nice}
        sources = str(Path(adaptlab.__file__).resolve().parents[1])  # the orchestrator's adaptlab
        try:
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", json.dumps(job), "--out", str(out)],
                capture_output=True,
                text=True,
                timeout=WORKER_TIMEOUT,
                env={**worker_env(settings["threads"]), "PYTHONPATH": sources},
                start_new_session=nice != 0,  # its own autogroup, whose nice it sets
            )
        except subprocess.TimeoutExpired:
            return {"error": f"worker timed out after {WORKER_TIMEOUT} s"}
        return worker_result(proc, out)


def describe(result: dict[str, Any]) -> str:
    """One progress line for a worker result."""
    if "error" in result:
        return f"FAILED: {result['error'].splitlines()[-1]}"
    steps = result["measurement"]["step_seconds"]
    clean = clean_steps(result)
    return (
        f"{1000 * statistics.median(clean or steps):7.0f} ms median, "
        f"{len(clean)}/{len(steps)} clean steps; begin {result['begin']['seconds']:.2f} s, "
        f"first stage's end {result['first_end']['seconds']:.2f} s"
    )


def measure_all(
    configs: list[Config], settings: dict[str, Any], args: argparse.Namespace
) -> dict[str, list[dict[str, Any]]]:
    """Interleaved rounds over `configs`, then re-runs of those with too few clean steps."""
    runs: dict[str, list[dict[str, Any]]] = {c.key: [] for c in configs}

    def one(config: Config, tag: str) -> None:
        waited = wait_for_quiet(args.max_wait) if args.nice >= 0 else 0.0
        started = time.monotonic()
        result = measure_once(config, settings, args.nice)
        result.update(round=tag, waited_for_quiet_s=waited)
        runs[config.key].append(result)
        print(
            f"  [{tag}] {config.key:<28} {describe(result)} ({time.monotonic() - started:.0f} s)",
            flush=True,
        )

    def short() -> list[Config]:
        return [
            c
            for c in configs
            if any("error" not in x for x in runs[c.key])
            and clean_count(runs[c.key]) < min_clean(args)
        ]

    interleave(configs, one, args.rounds, args.retries, short)
    return runs


def clean_count(results: list[dict[str, Any]]) -> int:
    return sum(len(clean_steps(r)) for r in results if "error" not in r)


def min_clean(args: argparse.Namespace) -> int:
    """Clean steps a configuration needs before its median uses clean steps only."""
    return max(3, (args.rounds * args.steps) // 2)


# ---------------------------------------------------------------------------------------------
# Summarising
# ---------------------------------------------------------------------------------------------


def summarise(config: Config, results: list[dict[str, Any]], needed: int) -> dict[str, Any]:
    """Medians of one configuration over its runs (clean steps when there are enough)."""
    ok = [r for r in results if "error" not in r]
    row: dict[str, Any] = {"key": config.key, "method": config.method, "strategy": config.strategy}
    if not ok:
        row["error"] = results[-1]["error"] if results else "not run"
        return row
    first = ok[0]
    sizes = first["stage_sizes"]
    begin, begin_contended = one_off_seconds([r["begin"] for r in ok])
    end, end_contended = one_off_seconds([r["first_end"] for r in ok])
    row.update(
        strategy_config=first["strategy_config"],
        method_config=first["method_config"],
        trainable=first["trainable"],
        **step_summary(ok, needed),
        begin_s=begin,
        begin_contended=begin_contended,
        begin_ms_per_example=1000 * begin / sizes[1],
        cache_mb=first["cache_bytes"] / 2**20,
        cache_examples=sizes[1],
        first_end_s=end,
        first_end_contended=end_contended,
        end_ms_per_example=1000 * end / end_examples(first["strategy_config"], sizes[0]),
        end_examples=end_examples(first["strategy_config"], sizes[0]),
    )
    return row


def end_examples(strategy_config: dict[str, Any], examples: int) -> int:
    """The examples a stage's end goes through: ewc's Fisher samples up to `fisher_samples` of
    the stage's `examples`; the other strategies' end does nothing (all are counted)."""
    return min(examples, int(strategy_config.get("fisher_samples", examples)))


def one_off_seconds(times: list[dict[str, float]]) -> tuple[float, bool]:
    """The median seconds of a one-off cost over runs, the clean runs' when there are any,
    and whether contended runs had to be used. A block under 10 ms (a hook with nothing to
    do) counts as clean: /proc/stat counts in 10 ms ticks."""
    clean = [
        t["seconds"]
        for t in times
        if t["seconds"] < 0.01 or t["foreign_cpu"] <= FOREIGN_CPU_LIMIT * t["seconds"] * CORES
    ]
    return statistics.median(clean or [t["seconds"] for t in times]), not clean


def add_ratios(rows: dict[str, dict[str, Any]], examples: int, epochs: int, batch: int) -> None:
    """Each row's step ratio to `sequential` with its method (overall and per round), and the
    projected stage of `examples` x `epochs`: its one-off share and its time ratio."""
    steps = epochs * math.ceil(examples / batch)
    for row in rows.values():
        base = rows.get(f"{row['method']}:{BASELINE}")
        if "error" in row or base is None or "error" in base:
            continue
        row["step_ratio"] = row["step_ms"] / base["step_ms"]
        common = sorted(set(row["step_ms_by_run"]) & set(base["step_ms_by_run"]))
        row["step_ratio_by_run"] = {
            r: row["step_ms_by_run"][r] / base["step_ms_by_run"][r] for r in common
        }
        sampled = end_examples(row["strategy_config"], examples)
        one_off = row["begin_ms_per_example"] * examples + row["end_ms_per_example"] * sampled
        training = steps * row["step_ms"]
        row["projected"] = {
            "examples": examples,
            "epochs": epochs,
            "one_off_s": one_off / 1000,
            "training_s": training / 1000,
            "one_off_share": one_off / (one_off + training),
            "stage_ratio": (one_off + training) / (steps * base["step_ms"]),
        }


def format_table(rows: list[dict[str, Any]], method: str, examples: int, epochs: int) -> str:
    """The results table of one method."""
    head = (
        f"{'strategy':<18} {'trainable':>9} {'step ms':>8} {'vs seq':>7} {'start ms/ex':>12} "
        f"{'cache MB':>8} {'end ms/ex':>10} {'one-off %':>9} {'stage vs seq':>12}  vs seq by round"
    )
    lines = [
        f"== {method}, the second stage's steps; vs seq = step time / sequential's",
        "start = the stage's begin (distillation: the teacher's cache) per training example; "
        "end = the first stage's end (ewc: the Fisher) per sampled example",
        f"one-off % and stage vs seq: projected for a stage of {examples} examples x {epochs} "
        "epochs from the measured rates; * = contended steps or runs used",
        head,
        "-" * len(head),
    ]
    for row in rows:
        if "error" in row:
            lines.append(failed_line(f"{row['strategy']:<18}", row))
            continue
        ratio, projected = row.get("step_ratio"), row.get("projected")
        cells = [
            f"{row['step_ms']:.0f}" + ("*" if row["contended"] else " "),
            f"{ratio:.3f}" if ratio is not None else "-",
            f"{row['begin_ms_per_example']:.2f}" + ("*" if row["begin_contended"] else " "),
            f"{row['cache_mb']:.3f}",
            f"{row['end_ms_per_example']:.2f}" + ("*" if row["first_end_contended"] else " "),
            f"{100 * projected['one_off_share']:.1f}" if projected else "-",
            f"{projected['stage_ratio']:.3f}" if projected else "-",
        ]
        rounds = ", ".join(f"{v:.3f}" for v in row.get("step_ratio_by_run", {}).values())
        widths = (8, 7, 12, 8, 10, 9, 12)
        lines.append(
            f"{row['strategy']:<18} {row['trainable']:>9,} "
            + " ".join(f"{cell:>{width}}" for cell, width in zip(cells, widths, strict=True))
            + f"  {rounds}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def count(text: str) -> int:
    """A command-line count: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default="houlsby,lora", help="comma-separated methods")
    parser.add_argument("--rounds", type=count, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--steps", type=count, default=6, help="timed steps per run (default 6)")
    parser.add_argument("--warmup", type=count, default=2, help="untimed steps first (default 2)")
    parser.add_argument(
        "--first-batches", type=count, default=2, help="steps of the first stage (default 2)"
    )
    parser.add_argument("--threads", type=count, default=2, help="torch threads (default 2)")
    parser.add_argument("--batch-size", type=count, default=16)
    parser.add_argument("--seq-len", type=count, default=128)
    parser.add_argument("--seed", type=int, default=0)
    add_worker_options(parser)
    parser.add_argument("--project-examples", type=count, default=1000)
    parser.add_argument("--project-epochs", type=count, default=3)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a tiny random BERT, houlsby only, 1 round of 1 + 3 steps of 16 x 32 tokens on "
        "1 thread, no waiting: checks that the script runs (its timings mean nothing)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.methods, args.rounds, args.warmup, args.steps = "houlsby", 1, 1, 3
        args.seq_len, args.threads, args.retries, args.max_wait = 32, 1, 0, 0.0
    return args


def main(argv: list[str] | None = None) -> int:
    """Measure every strategy, print the tables, write the JSON."""
    args = parse_args(argv)
    if args.worker:
        args.out.write_text(json.dumps(run_worker(json.loads(args.worker)), indent=1))
        return 0
    started = time.monotonic()
    strategies = [entry.name for entry in list_strategies()]
    methods = args.methods.split(",")
    for method in methods:
        try:
            resolve(method, {})
        except ConfigError as error:
            sys.exit(f"--methods: {error}")
    configs = [Config(method, strategy) for method in methods for strategy in strategies]
    with tempfile.TemporaryDirectory(prefix="continual_step_model_") as tmp:
        settings = {
            "model": tiny_model(Path(tmp)) if args.quick else MODEL,
            "batch_size": args.batch_size,
            "seq_len": args.seq_len,
            "warmup": args.warmup,
            "steps": args.steps,
            "first_batches": args.first_batches,
            "threads": args.threads,
            "seed": args.seed,
        }
        print(
            f"{len(configs)} configurations x {args.rounds} rounds, {args.warmup} warm-up + "
            f"{args.steps} timed steps of the second stage, batch {args.batch_size}x"
            f"{args.seq_len}, {args.threads} threads, model {settings['model']}",
            flush=True,
        )
        runs = measure_all(configs, settings, args)
    needed = min_clean(args)
    rows = {c.key: summarise(c, runs[c.key], needed) for c in configs}
    add_ratios(rows, args.project_examples, args.project_epochs, args.batch_size)
    wall = time.monotonic() - started
    text = [
        format_table(
            [rows[c.key] for c in configs if c.method == method],
            method,
            args.project_examples,
            args.project_epochs,
        )
        for method in methods
    ]
    text.append(f"wall time {wall:.0f} s")
    print("\n\n".join(text))
    any_ok = next((r for rs in runs.values() for r in rs if "error" not in r), None)
    report = {
        **heading("continual_step"),
        "wall_seconds": wall,
        "settings": {
            **settings,
            "model": "tiny random BERT (--quick)" if args.quick else MODEL,
            "rounds": args.rounds,
            "nice": args.nice,
            "foreign_cpu_limit": FOREIGN_CPU_LIMIT,
            "min_clean_steps": needed,
            "project_examples": args.project_examples,
            "project_epochs": args.project_epochs,
            "quick": args.quick,
        },
        "machine": {
            "cpu_count": CORES,
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "torch": importlib.metadata.version("torch"),
            "transformers": importlib.metadata.version("transformers"),
            "torch_threads": any_ok["threads"] if any_ok else None,
            "torch_interop_threads": any_ok["interop_threads"] if any_ok else None,
        },
        "adaptlab": str(Path(adaptlab.__file__).parent),
        "rows": list(rows.values()),
        "runs": runs,
        "table": "\n\n".join(text),
    }
    write_json(report, args.out, indent=1)
    return 0


def tiny_model(folder: Path) -> str:
    """A tiny random BERT with the real MiniLM tokenizer, saved under `folder` (`--quick`)."""
    from study_overhead import tiny_model_folder

    return tiny_model_folder(folder / "tiny-bert")


if __name__ == "__main__":
    sys.exit(main())

"""Training-step time of the lifelong-pretraining strategies (a causal-LM sequence), as a ratio
to `sequential`, and the one-off cost of the `kd-logit` teacher.

Model: the built-in `smollm2-135m` with the method's adapter added as `adaptlab sequence
--objective causal-lm` adds it (LoRA with its default options unless `--method` says
otherwise), each stage trained by the sequence's own `train_stage`. Data: two in-memory
corpora of random token documents of `--length` tokens. The first stage trains
`--first-steps` steps, so that the second has something to replay or distil; the second
stage's steps are the ones timed (a step runs from one training-mode forward of the model to
the next, as in `continual_step.py`: the documents, replayed ones included, collating,
forward, the strategy's penalty, backward, clipping, AdamW, the schedule), the first
`--warmup` dropped. Steps during which other processes used more than 10% of the machine are
left out (all of them are used, and the row marked `*`, when fewer than 3 are clean); the
figure is the median step, the ratio to `sequential`'s.

One-off cost: as the second stage begins, `kd-logit` runs the model once over the stage's
training documents in evaluation mode and caches each position's top 64 words
(`distillation.TEACHER_TOP_K`), so that no step runs a teacher: reported per training document,
with the cache's size, and projected on a stage of `--project-docs` documents trained
`--project-epochs` epochs (its share of that stage, and the stage's time against
`sequential`'s; arithmetic on the measured rates, dev evaluation left out).

All strategies run in one process, `--rounds` interleaved rounds (odd rounds in reverse order),
each round on a freshly loaded model.

Usage (from the repository root)::

    .venv/bin/python benchmarks/continual_lm_step.py            # table, results JSON
    .venv/bin/python benchmarks/continual_lm_step.py --quick --out /tmp/continual_lm_step.json
        # 2 short documents a step, 1 round: checks that the script runs, measures little
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from continual_step import StepClock, stopwatch
from methods_step import CORES, step_summary
from step_harness import configure_threads

import adaptlab
from adaptlab.continual import SequenceSpec
from adaptlab.continual.corpus_run import Document, TextStage, TextStageRun
from adaptlab.continual.distillation import TextLogitDistillation
from adaptlab.continual.registry import make_strategy, strategies_for
from adaptlab.continual.stage_loop import train_stage
from adaptlab.continual.stages import use_stage_adapter
from adaptlab.models.loading import load_model
from adaptlab.records.config import TrainConfig

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "continual_lm_step.json"
MODEL = "smollm2-135m"
BASELINE = "sequential"
MIN_CLEAN = 3
LEARNING_RATE = 1e-3


def random_corpus(
    name: str, vocab: int, length: int, sizes: tuple[int, int], seed: int
) -> TextStage:
    """`sizes` = (train, dev) documents of `length` random token ids (test = dev: only
    training is measured)."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (sum(sizes), length), generator=generator)
    documents: list[Document] = [tuple(row.tolist()) for row in ids]
    train, dev = documents[: sizes[0]], documents[sizes[0] :]
    return TextStage(name, train, dev, dev)


def measure(strategy_name: str, round_index: int, args: argparse.Namespace) -> dict[str, Any]:
    """Train the first corpus briefly, then time the second corpus's steps and `begin` (the
    steps as `methods_step.step_summary` reads them)."""
    train = TrainConfig(
        epochs=1, batch_size=args.batch_size, max_length=args.length, seed=args.seed
    )
    spec = SequenceSpec.build(
        args.model,
        ("first", "second"),
        args.method,
        strategy_name,
        train=train,
        objective="causal-lm",
    )
    loaded = load_model(spec.model, "causal_lm", seed=args.seed)
    model = loaded.model
    vocab = int(getattr(model, "config").vocab_size)  # noqa: B009 (untyped attribute)
    second_steps = args.warmup + args.steps
    stages = [
        random_corpus("first", vocab, args.length, (args.batch_size * args.first_steps, 2), 1),
        random_corpus("second", vocab, args.length, (args.batch_size * second_steps, 2), 2),
    ]
    strategy = make_strategy(spec.strategy, spec.objective)
    pad_id = loaded.tokenizer.pad_token_id
    begins: list[dict[str, float]] = []

    def stage(index: int) -> TextStageRun:
        """Corpus `index` made ready as `adaptlab sequence` does, its `begin` timed."""
        use_stage_adapter(model, strategy.adapter_name(index), spec.methods, args.seed + index)
        run = TextStageRun(model, stages, index, train.eval_batch_size, pad_id=pad_id)
        with stopwatch(begins):
            strategy.begin(run)
        return run

    train_stage(stage(0), strategy, train, LEARNING_RATE, progress=False)
    second, clock = stage(1), StepClock()
    handle = model.register_forward_pre_hook(clock)
    train_stage(second, strategy, train, LEARNING_RATE, progress=False)
    handle.remove()
    cache = 0
    if isinstance(strategy, TextLogitDistillation):
        cache = sum(t.ids.nbytes + t.log_probs.nbytes for t in strategy.teacher)
    return {
        "round": round_index,
        "measurement": {
            "step_seconds": clock.wall[args.warmup :],
            "step_foreign_cpu": clock.foreign[args.warmup :],
        },
        "begin_s": begins[1]["seconds"],
        "documents": len(stages[1].train),
        "cache_bytes": cache,
    }


def summarize(
    results: dict[str, list[dict[str, Any]]], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """One row per strategy: median step, ratio to sequential, teacher cost and projection."""
    rows = []
    for name, runs in results.items():
        begin = statistics.median(r["begin_s"] / r["documents"] for r in runs)
        rows.append(
            {
                "strategy": name,
                **step_summary(runs, MIN_CLEAN),
                "begin_ms_per_document": 1000 * begin,
                "cache_bytes_per_document": runs[0]["cache_bytes"] / runs[0]["documents"],
            }
        )
    base = next(row for row in rows if row["strategy"] == BASELINE)
    steps = args.project_docs / args.batch_size * args.project_epochs
    for row in rows:
        row["ratio"] = row["step_ms"] / base["step_ms"]
        training = steps * row["step_ms"] / 1000
        once = args.project_docs * row["begin_ms_per_document"] / 1000
        row["projected_one_off_share"] = once / (training + once)
        row["projected_stage_ratio"] = (training + once) / (steps * base["step_ms"] / 1000)
    return rows


def print_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"{'strategy':<20}{'step ms':>10}{'ratio':>8}{'begin ms/doc':>14}{'cache KB/doc':>14}"
        f"{'one-off share':>15}{'stage ratio':>13}"
    )
    for row in rows:
        mark = "*" if row["contended"] else ""
        print(
            f"{row['strategy']:<20}{row['step_ms']:>9.0f}{mark:1}{row['ratio']:>8.3f}"
            f"{row['begin_ms_per_document']:>14.1f}{row['cache_bytes_per_document'] / 1024:>14.1f}"
            f"{100 * row['projected_one_off_share']:>14.1f}%{row['projected_stage_ratio']:>13.3f}"
        )
    print(
        f"(median training step of the second corpus, batch {args.batch_size} x {args.length} "
        f"tokens, {args.threads} threads; projection: {args.project_docs} documents, "
        f"{args.project_epochs} epoch(s); * fewer than {MIN_CLEAN} uncontended steps)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--method", default="lora")
    parser.add_argument("--strategies", default=",".join(strategies_for("causal-lm")))
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--length", type=int, default=64, help="tokens a document")
    parser.add_argument("--first-steps", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10, help="timed steps a round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--project-docs", type=int, default=400)
    parser.add_argument("--project-epochs", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 round")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    if args.quick:
        args.batch_size, args.length, args.steps, args.warmup, args.rounds = 2, 16, 2, 1, 1
    configure_threads(args.threads)
    names = args.strategies.split(",")
    if BASELINE not in names:
        parser.error(f"--strategies must include {BASELINE}, the baseline of the ratios")
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    started = time.perf_counter()
    for round_index in range(args.rounds):
        for name in names if round_index % 2 == 0 else reversed(names):
            results[name].append(measure(name, round_index, args))
            print(f"round {round_index + 1}/{args.rounds} {name}: done", flush=True)
    rows = summarize(results, args)
    print_table(rows, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {CORES} cores, torch threads {args.threads}",
        "torch": torch.__version__,
        "adaptlab": adaptlab.__version__,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "wall_s": time.perf_counter() - started,
        "rows": rows,
        "runs": results,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""Supervised fine-tuning throughput and step memory: adaptlab against TRL's `SFTTrainer`.

SmolLM2-135M (`smollm2-135m`), LoRA r = 16 (alpha 32, no dropout) on every linear layer of the
blocks, max length 512, fp32, no gradient checkpointing, AdamW lr 2e-4, one torch thread
(`--threads`), batch `--batch` rows (packed) or examples (padded) a step, on two built-in
corpora: countries-qa (prompt -> completion, loss on the completion) and friends-chat (chats,
loss on the assistant turns). The same examples, in the same order, go to three routes, one
after another in this process (`sft_routes`):

- adaptlab: `adaptlab train --task sft|chat --pack` (packing, the chunked next-token loss);
- TRL 1.16 `SFTTrainer` + PEFT, `packing=True` (best-fit decreasing, padding-free rows);
- TRL 1.16 `SFTTrainer` + PEFT, `packing=False` (right-padded examples).

Each route runs `--steps` + 2 optimizer steps: a warm-up step, the timed steps, and one step
whose live-tensor peak is counted (the profiler's allocation records, above what was live as it
began, as `step_memory.py` counts it). The examples are the corpus's first training examples
that fit max_length uncut, as many as adaptlab packs into exactly the rows of those steps, so
adaptlab and TRL packed train each example once. Target tokens per second: the target tokens of
the timed steps (labels after a row's first position that are not ignored: what each side's
loss is the mean over) over the seconds from the end of the warm-up step to the end of the last
timed one, on the wall clock and in this process's CPU time (on a shared machine the wall clock
also counts the time spent waiting for a core, the CPU time does not).

TRL's settings that differ from its defaults, so that both sides train alike:
`gradient_checkpointing=False` and `bf16=False` (adaptlab's defaults: no checkpointing, fp32).
SmolLM2's chat template has no `{% generation %}` markers and TRL cannot add them, so TRL's
chats use the same template with them (the same tokens and targets: the JSON counts the
examples whose ids and labels match adaptlab's).

Also counted, on fake tensors as `large_model_memory.py` counts (no timing): the peak of live
tensor bytes of one AdamW step (weights, gradients, optimizer state, activations) at the
TinyLlama-1.1B shape, fp32, LoRA as above, 2,048 tokens packed as 4 examples of 512 (every
position a target; the same inputs for all: positions restarting per example and adaptlab's
block-diagonal mask, the size of the one transformers builds for TRL's padding-free row), with
three losses: adaptlab's chunked loss, TRL 1.16's fused LM head (its
torch path, which a CPU runs; a GPU runs Triton kernels), and the full logits (transformers'
own `labels=` loss). The check lines count the same steps on real and fake tensors on a small
shape.

Goals (reported, never asserted): adaptlab's target tokens per second >= 1.2 x TRL's best
route's (wall clock, and per CPU-second), its step peak <= 0.8 x TRL packed's (the same rows;
a padded step holds other examples).

Usage (from the repository root; about 15 minutes on 2 busy cores, `--quick` about 10)::

    nice -n 10 .venv/bin/python benchmarks/sft_throughput.py
    .venv/bin/python benchmarks/sft_throughput.py --quick      # batch 1, 1 timed step
"""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path
from typing import Any

import torch
from large_model_memory import check_lines, fake_peaks
from large_model_setups import SHAPES, Setup, Step
from report_file import goal, heading, versions, write_report
from sft_routes import CORPORA, LEARNING_RATE, Settings, adaptlab_route, select, trl_route
from tensor_bytes import LiveBytes
from torch import nn
from trl_comparison import (
    ALL_LINEAR,
    ALPHA,
    LORA_SETTINGS,
    RANK,
    check_shapes,
    command_line,
    peft_lora,
    start,
)

from adaptlab.models.loading import load_tokenizer

OUT = Path(__file__).resolve().parent / "results" / "sft_throughput.json"
MB, GIB = 1e6, 1024**3
GOAL_SPEED, GOAL_PEAK = 1.2, 0.8


def packed_inputs(ids: torch.Tensor, examples: int) -> dict[str, torch.Tensor]:
    """`ids` (1, tokens) as `examples` packed examples of equal length: positions restarting
    at 0 in each, and the block-diagonal causal mask adaptlab gives SDPA."""
    from adaptlab.engine.packing_attention import block_causal_mask

    tokens = ids.shape[1]
    lengths = [tokens // examples + (i < tokens % examples) for i in range(examples)]
    positions = torch.cat([torch.arange(n) for n in lengths])[None]
    segments = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])[None]
    return {
        "input_ids": ids,
        "position_ids": positions,
        "attention_mask": block_causal_mask(segments, "sdpa"),
    }


def _peft(model: nn.Module) -> nn.Module:
    """PEFT LoRA on every linear layer, as the TRL route configures it."""
    from peft import get_peft_model

    return get_peft_model(model, peft_lora())


def fake_setups(examples: int) -> list[Setup]:
    """The three steps of the loss comparison, on `examples` packed examples."""

    def adaptlab_chunked(model: nn.Module, counter: LiveBytes) -> Step:
        from adaptlab.engine.lm_head_capture import lm_head_input
        from adaptlab.engine.lm_loss import next_token_loss
        from adaptlab.engine.precision import keep_trained_in_float32
        from adaptlab.methods.adapt import adapt

        lora = {"rank": RANK, "alpha": ALPHA, "targets": ALL_LINEAR}
        adapt(model, {"lora": lora}, train_head=False)
        keep_trained_in_float32(model)

        def step(ids: torch.Tensor) -> None:
            head = lm_head_input(model, **packed_inputs(ids, examples))
            next_token_loss(head, ids).mean().backward()  # GenerativeLm.loss

        return step

    def trl_fused(model: nn.Module, counter: LiveBytes) -> Step:
        from trl.trainer.utils import add_fused_lm_head

        add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))  # as SFTTrainer
        adapted = _peft(model)

        def step(ids: torch.Tensor) -> None:
            out = adapted(**packed_inputs(ids, examples), labels=ids, fused_lm_head=True)
            (-out.log_probs.sum() / out.label_mask.sum().clamp(min=1)).backward()

        return step

    def full_logits(model: nn.Module, counter: LiveBytes) -> Step:
        adapted = _peft(model)

        def step(ids: torch.Tensor) -> None:
            adapted(**packed_inputs(ids, examples), labels=ids).loss.backward()

        return step

    ours = (
        "adaptlab.methods.adapt",
        "adaptlab.engine.lm_loss",
        "adaptlab.engine.packing_attention",
    )
    peft = ("peft", "adaptlab.engine.packing_attention")
    return [
        Setup("adaptlab", "adaptlab, chunked loss", adaptlab_chunked, ours),
        Setup(
            "trl", "TRL 1.16, fused LM head (torch path)", trl_fused, (*peft, "trl.trainer.utils")
        ),
        Setup("logits", "full logits (transformers' loss)", full_logits, peft),
    ]


def loss_memory(args: argparse.Namespace) -> dict[str, Any]:
    """Fake-tensor peaks on the large shape, and the real / fake check on the small one."""
    setups = fake_setups(args.fake_examples)
    rows, checks = fake_peaks(
        setups, args.fake_shape, args.fake_tokens, args.check_shape, args.check_tokens
    )
    return {
        "shape": args.fake_shape,
        "shape_config": SHAPES[args.fake_shape],
        "tokens": args.fake_tokens,
        "examples": args.fake_examples,
        "labels": {setup.key: setup.label for setup in setups},
        "rows": rows,
        "check_shape": args.check_shape,
        "check_tokens": args.check_tokens,
        "checks": checks,
    }


def throughput(args: argparse.Namespace, settings: Settings) -> list[dict[str, Any]]:
    """Every corpus through the three routes, in this order (TRL follows adaptlab's order)."""
    tokenizer = load_tokenizer(settings.model)
    corpora = []
    for corpus in args.corpora:
        workload = select(corpus, tokenizer, settings)
        print(
            f"{corpus}: {len(workload.examples)} examples in {len(workload.rows)} rows",
            flush=True,
        )
        ours = adaptlab_route(workload, settings)
        _say(corpus, ours)
        results = [ours]
        for packing in (True, False):
            gc.collect()
            theirs = trl_route(workload, settings, packing, ours["order"])
            _say(corpus, theirs)
            results.append(theirs)
        corpora.append(
            {
                "corpus": corpus,
                "task": workload.task,
                "examples": len(workload.examples),
                "rows": len(workload.rows),
                "results": results,
                "goals": goals(results),
            }
        )
    return corpora


def _say(corpus: str, result: dict[str, Any]) -> None:
    """A progress line: one route's throughput and peak."""
    print(
        f"  {corpus} {result['route']}: {result['target_tokens_per_second']:.1f} target tok/s, "
        f"peak {result['peak_bytes'] / MB:.1f} MB",
        flush=True,
    )


def goals(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """adaptlab against TRL: target tokens per second against TRL's best route (wall clock, and
    per CPU-second, which waiting for a busy CPU does not change), and the step peak against
    TRL packed, whose profiled step trains the same rows (a padded step holds other examples)."""
    ours, theirs = results[0], results[1:]
    made = []
    for key, what in (
        ("target_tokens_per_second", "target tokens/s"),
        ("target_tokens_per_cpu_second", "target tokens per CPU-second"),
    ):
        best = max(theirs, key=lambda r: r[key])
        made.append(goal(f"{what} vs {best['route']}", ours[key] / best[key], ">=", GOAL_SPEED))
    packed = next(r for r in theirs if r["packing"])
    peak = ours["peak_bytes"] / packed["peak_bytes"]
    made.append(goal(f"step peak vs {packed['route']} (same rows)", peak, "<=", GOAL_PEAK))
    return made


def format_report(report: dict[str, Any]) -> str:
    """The throughput table, the goals, the fake-tensor table and its checks."""
    s = report["settings"]
    head = (
        f"{'corpus':13} {'route':10} {'timed ex':>8} {'tgt tok':>7} {'wall s':>7} "
        f"{'tok/s':>6} {'CPU s':>7} {'tok/CPU s':>9} {'prof pos':>8} {'peak MB':>8} "
        f"{'ratio tok/s':>11} "
        f"{'tok/CPU s':>9} {'peak':>5}"
    )
    lines = [
        f"{s['model']}, LoRA r={RANK} on every linear layer, max length {s['max_length']}, fp32, "
        f"{s['threads']} thread(s), batch {s['batch']} rows (packed) or examples (padded)",
        f"each route: 1 warm-up + {s['timed_steps']} timed + 1 profiled step; timed ex, tgt tok: "
        "the examples and target tokens of the timed steps",
        "prof pos: token positions (padding included) of the profiled step; peak: its live "
        "tensor bytes above its start; ratios: adaptlab / that route",
        head,
        "-" * len(head),
    ]
    for corpus in report["corpora"]:
        ours = corpus["results"][0]
        for r in corpus["results"]:
            lines.append(
                f"{corpus['corpus']:13} {r['route']:10} {r['timed_examples']:8d} "
                f"{r['timed_target_tokens']:7d} {r['timed_seconds']:7.1f} "
                f"{r['target_tokens_per_second']:6.1f} {r['timed_cpu_seconds']:7.1f} "
                f"{r['target_tokens_per_cpu_second']:9.1f} {r['positions_per_step'][-1]:8d} "
                f"{r['peak_bytes'] / MB:8.1f} "
                f"{ours['target_tokens_per_second'] / r['target_tokens_per_second']:11.2f} "
                f"{ours['target_tokens_per_cpu_second'] / r['target_tokens_per_cpu_second']:9.2f} "
                f"{ours['peak_bytes'] / r['peak_bytes']:5.2f}"
            )
    lines.append("goals (measured, not asserted):")
    for corpus in report["corpora"]:
        for g in corpus["goals"]:
            verdict = "PASS" if g["pass"] else "FAIL"
            lines.append(
                f"  {verdict}  {corpus['corpus']}: {g['goal']}: {g['value']:.2f} "
                f"(goal {g['op']} {g['limit']})"
            )
    memory = report["loss_memory"]
    if memory:
        lines.append(
            f"\npeak live tensor GiB of one AdamW step, {memory['shape']} shape, fp32, "
            f"{memory['tokens']} tokens packed as {memory['examples']} examples, fake tensors:"
        )
        rows = {row["setup"]: row for row in memory["rows"]}
        base = rows["adaptlab"]["peak_bytes"]
        for key, row in rows.items():
            lines.append(
                f"  {memory['labels'][key]:40} {row['peak_bytes'] / GIB:8.3f}   "
                f"adaptlab / this: {base / row['peak_bytes']:.3f}"
            )
        where = f"{memory['check_shape']} @{memory['check_tokens']}"
        lines += check_lines(memory["checks"], where)
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line."""
    parser = command_line(__doc__.splitlines()[0])
    parser.add_argument("--corpora", default=",".join(CORPORA), help="comma-separated")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--batch", type=int, default=2, help="rows or examples a step")
    parser.add_argument("--steps", type=int, default=3, help="timed steps of each route")
    parser.add_argument("--quick", action="store_true", help="batch 1, 1 timed step")
    parser.add_argument("--fake-shape", default="tinyllama-1.1b", help="'' skips the fake part")
    parser.add_argument("--fake-tokens", type=int, default=2048)
    parser.add_argument("--fake-examples", type=int, default=4)
    parser.add_argument("--check-shape", default="tiny")
    parser.add_argument("--check-tokens", type=int, default=128)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.steps = 1, 1
    args.corpora = [c for c in args.corpora.split(",") if c]
    unknown = [c for c in args.corpora if c not in CORPORA]
    if unknown:
        parser.error(f"unknown corpus {unknown[0]!r}; corpora: {', '.join(CORPORA)}")
    check_shapes(parser, (args.fake_shape, args.check_shape), SHAPES)
    return args


def main(argv: list[str] | None = None) -> int:
    """Measure, print the report, write the JSON."""
    args = parse_args(argv)
    started = start(args.threads)
    settings = Settings.of(args, args.batch, timed_steps=args.steps)
    corpora = throughput(args, settings)
    print("loss memory (fake tensors):", flush=True)
    memory = loss_memory(args) if args.fake_shape else {}
    report: dict[str, Any] = {
        **heading("sft_throughput"),
        "settings": {
            "model": args.model,
            "max_length": args.max_length,
            "batch": args.batch,
            "timed_steps": args.steps,
            "steps_per_route": args.steps + 2,
            "lora": LORA_SETTINGS,
            "learning_rate": LEARNING_RATE,
            "precision": "fp32",
            "gradient_checkpointing": False,
            "threads": torch.get_num_threads(),
            "trl_changed_defaults": {"gradient_checkpointing": False, "bf16": False},
        },
        "environment": versions("torch", "transformers", "trl", "peft", "adaptlab"),
        "corpora": corpora,
        "loss_memory": memory,
        "wall_seconds": time.monotonic() - started,
    }
    write_report(report, format_report(report), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Training-step time of LoRA on a fused query-key-value layer: adaptlab's one pair per part
(the query's rows and the value's rows of GPT-2's `c_attn`, GPT-NeoX's `query_key_value`)
against PEFT's one pair on the whole fused layer, the configuration PEFT users run on these
models.

Models: GPT-2 small's shape (12 layers, hidden 768, 12 heads, vocabulary 50,257) and Pythia-160M's
(GPT-NeoX, 12 layers, hidden 768, 12 heads, FFN 3072, vocabulary 50,304), random weights, causal
LM head. Batch: 8 x 128 random tokens, the loss on every token. LoRA: rank 8, alpha 8, no
dropout; adaptlab's `lora` default targets (query, value: 2 x 8 x (768 + 768) per block) and
PEFT's default target for these models (the fused layer: 8 x (768 + 2304) per block).
Optimizer: AdamW, lr 1e-4, over the trainable tensors.

All configurations of a model live in one process and are timed in interleaved rounds (each
round times every configuration once, `--steps` steps after one warm-up step, odd rounds in
reverse order); the figure is the median step over all rounds, and the table gives each as a
ratio to PEFT's. torch runs `--threads` intra-op threads; run it with OMP_WAIT_POLICY=PASSIVE
(or on a quiet machine): the times are then the cores', not a busy neighbour's.

Usage (from the repository root)::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/fused_lora_step.py   # about 8 minutes
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/fused_lora_step.py --quick
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import transformers as T
from torch import nn

import adaptlab

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "fused_lora_step.json"
SHAPES: dict[str, Callable[[], T.PretrainedConfig]] = {
    "gpt2-small": lambda: T.GPT2Config(n_embd=768, n_layer=12, n_head=12, vocab_size=50257),
    "pythia-160m": lambda: T.GPTNeoXConfig(
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        vocab_size=50304,
        rotary_pct=0.25,
    ),
}
FUSED = {"gpt2-small": "c_attn", "pythia-160m": "query_key_value"}
RANK = 8


def model_of(shape: str, seed: int = 0) -> nn.Module:
    """A causal LM of `shape` with random weights, in train mode, dropout off."""
    torch.manual_seed(seed)
    config = SHAPES[shape]()
    for name in ("resid_pdrop", "embd_pdrop", "attn_pdrop", "attention_dropout", "hidden_dropout"):
        if hasattr(config, name):
            setattr(config, name, 0.0)
    return T.AutoModelForCausalLM.from_config(config).train()


def adaptlab_lora(shape: str) -> nn.Module:
    model = model_of(shape)
    adaptlab.adapt(model, "lora", rank=RANK, alpha=float(RANK), train_head=False)
    return model


def peft_lora(shape: str) -> nn.Module:
    import peft

    config = peft.LoraConfig(
        r=RANK,
        lora_alpha=RANK,
        lora_dropout=0.0,
        target_modules=[FUSED[shape]],
        fan_in_fan_out=shape == "gpt2-small",
    )
    return peft.get_peft_model(model_of(shape), config)  # type: ignore[no-any-return]


SETUPS: dict[str, Callable[[str], nn.Module]] = {
    "peft": peft_lora,
    "adaptlab": adaptlab_lora,
}


class Runner:
    """One configuration: its model, optimizer and batch, and its timed steps."""

    def __init__(self, shape: str, setup: str, batch: int, length: int) -> None:
        self.model = SETUPS[setup](shape)
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.trainable = sum(p.numel() for p in trainable)
        self.optimizer = torch.optim.AdamW(trainable, lr=1e-4)
        vocab = self.model.config.vocab_size
        generator = torch.Generator().manual_seed(1)
        self.ids = torch.randint(vocab, (batch, length), generator=generator)
        self.times: list[float] = []
        self.losses: list[float] = []

    def step(self) -> float:
        start = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.model(input_ids=self.ids, labels=self.ids).loss
        loss.backward()
        self.optimizer.step()
        self.losses.append(loss.item())
        return time.perf_counter() - start


def measure(shape: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    runners = {name: Runner(shape, name, args.batch, args.length) for name in SETUPS}
    for runner in runners.values():
        runner.step()  # warm-up: AdamW's state, the allocator
    order = list(runners)
    for round_index in range(args.rounds):
        for name in order if round_index % 2 == 0 else reversed(order):
            runner = runners[name]
            runner.step()  # warm-up after the other configurations ran
            runner.times += [runner.step() for _ in range(args.steps)]
    peft_median = statistics.median(runners["peft"].times)
    return [
        {
            "shape": shape,
            "setup": name,
            "trainable": runner.trainable,
            "median_step_s": statistics.median(runner.times),
            "steps": len(runner.times),
            "ratio_to_peft": statistics.median(runner.times) / peft_median,
            "loss_first": runner.losses[0],
            "loss_last": runner.losses[-1],
        }
        for name, runner in runners.items()
    ]


def format_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{'model':<12} {'setup':<9} {'trainable':>10} {'median step s':>14} {'/ PEFT':>7}",
    ]
    for row in rows:
        lines.append(
            f"{row['shape']:<12} {row['setup']:<9} {row['trainable']:>10,} "
            f"{row['median_step_s']:>14.3f} {row['ratio_to_peft']:>7.3f}"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="1 round of 1 step, batch 2 x 32")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.steps, args.batch, args.length = 1, 1, 2, 32
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = [row for shape in args.shapes.split(",") for row in measure(shape, args)]
    print(format_table(rows))
    report = {
        "benchmark": "fused_lora_step",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": platform.machine(),
        "torch": torch.__version__,
        "transformers": T.__version__,
        "threads": args.threads,
        "batch": [args.batch, args.length],
        "rounds": args.rounds,
        "steps_per_round": args.steps,
        "rows": rows,
    }
    if not args.quick:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

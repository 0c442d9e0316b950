"""What the comparisons with TRL (`sft_throughput.py`, `dpo_throughput.py`) share: the LoRA both
sides train (adaptlab's targets, PEFT's config of it), the settings both sides read, and how a
comparison starts."""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any, Self

import torch

from adaptlab.models.resolve import resolve_model

RANK, ALPHA = 16, 32.0
SEED = 0
ALL_LINEAR = ["query", "key", "value", "attention_out", "ffn_in", "ffn_out"]
"""adaptlab's LoRA targets for every linear layer of a block (ffn_in: gate and up)."""
LORA_SETTINGS = {"rank": RANK, "alpha": ALPHA, "dropout": 0.0, "targets": "every linear"}
"""The LoRA of both sides, as the reports record it."""


def peft_lora() -> Any:
    """PEFT's `LoraConfig` of the LoRA above: every linear layer, no dropout, a causal LM."""
    from peft import LoraConfig

    return LoraConfig(
        r=RANK,
        lora_alpha=ALPHA,
        lora_dropout=0.0,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )


@dataclass(frozen=True)
class SharedSettings:
    """What both sides read: the model (its name and folder), the length, the batch."""

    model: str
    model_folder: str
    max_length: int
    batch: int

    @classmethod
    def of(cls, args: argparse.Namespace, batch: int, **more: int) -> Self:
        """The settings of the command line `args` (its model resolved to its folder)."""
        folder = resolve_model(args.model).location
        return cls(args.model, folder, args.max_length, batch, **more)


def command_line(description: str) -> argparse.ArgumentParser:
    """A parser of the options every comparison takes: the model and torch's threads."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default="smollm2-135m", help="built-in name or model folder")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    return parser


def check_shapes(
    parser: argparse.ArgumentParser, shapes: Iterable[str], known: Collection[str]
) -> None:
    """Stop with a usage error when a shape named (not '') is not one of `known`."""
    for shape in shapes:
        if shape and shape not in known:
            parser.error(f"unknown shape {shape!r}; shapes: {', '.join(known)}")


def start(threads: int) -> float:
    """Silence TRL's and transformers' advice (printed per trainer), give torch `threads`
    threads; the monotonic clock's time, when the comparison starts."""
    warnings.filterwarnings("ignore")
    torch.set_num_threads(threads)
    return time.monotonic()

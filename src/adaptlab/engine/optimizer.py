"""The optimiser of paper-effectiveness §3 / App. A.2: AdamW with weight decay on matrices
only, and a learning rate that warms up linearly and then decays linearly to 0."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import nn

from adaptlab.records.config import TrainConfig


def optimizer_and_schedule(
    trainable: Sequence[tuple[str, nn.Parameter]],
    config: TrainConfig,
    learning_rate: float,
    total_steps: int,
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW (weight decay on matrices only) and the linear warm-up and decay schedule."""
    optimizer = torch.optim.AdamW(
        [
            {
                "params": [p for _, p in trainable if p.ndim >= 2],
                "weight_decay": config.weight_decay,
            },
            {"params": [p for _, p in trainable if p.ndim < 2], "weight_decay": 0.0},
        ],
        lr=learning_rate,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, _linear_warmup(math.ceil(config.warmup_ratio * total_steps), total_steps)
    )
    return optimizer, scheduler


def _linear_warmup(warmup: int, total: int) -> Callable[[int], float]:
    """LR multiplier: linear ramp over `warmup` steps, then linear decay to 0 at `total`."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor

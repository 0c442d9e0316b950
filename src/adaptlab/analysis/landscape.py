"""The loss along the line from the starting to the trained weights (paper-effectiveness §5).

f(a) = L(theta0 + a (theta1 - theta0)) over the parameters that trained (§5, after Hao et al.
2019), a in [-2, 2] at 20 evenly spaced points; a = 0 (the start) and a = 1 (the trained model)
are always added so the curve shows both ends of training. theta0 is what `adapt` kept: the
pretrained values for trained base weights, the seeded initial values of inserted modules
and of the head. The model is restored bit-exactly afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

import adaptlab.checks as checks
from adaptlab.data.encoding import TextEncoder
from adaptlab.errors import ConfigError, DataError
from adaptlab.methods.adapt import get_handle
from adaptlab.progress import track
from adaptlab.runs.evaluation import evaluate

DEFAULT_POINTS = 20
DEFAULT_SPAN = 2.0
MAX_POINTS = 200
"""Each point is one pass over the split; 200 already draw a smooth curve."""
MIN_SPAN, MAX_SPAN = 0.01, 100.0
"""alpha counts training steps theta1 - theta0: a narrower span keeps every point within 1% of
the start, a wider one takes the weights 100 steps past the trained ones, where the loss of
any model overflows."""


@dataclass(frozen=True)
class Landscape:
    """Loss at each interpolation coefficient alpha (sorted)."""

    alphas: tuple[float, ...]
    losses: tuple[float, ...]

    def loss_at(self, alpha: float) -> float:
        """The loss measured at exactly `alpha` (0 and 1 always are)."""
        return self.losses[self.alphas.index(alpha)]

    def to_dict(self) -> dict[str, Any]:
        return {"alphas": list(self.alphas), "losses": list(self.losses)}


def alphas(points: int = DEFAULT_POINTS, span: float = DEFAULT_SPAN) -> tuple[float, ...]:
    """`points` evenly spaced coefficients in [-span, span], plus 0 and 1; ConfigError outside
    2 .. MAX_POINTS points and a span of MIN_SPAN .. MAX_SPAN."""
    checks.at_least(points, 2, "--points")
    checks.positive_finite(span, "--span")
    if points > MAX_POINTS:
        raise ConfigError(
            f"--points must be at most {MAX_POINTS} (each point is one pass over the split), "
            f"got {points}"
        )
    if not MIN_SPAN <= span <= MAX_SPAN:
        raise ConfigError(
            f"--span must be from {MIN_SPAN:g} to {MAX_SPAN:g} (alpha counts training steps: "
            "narrower stays within 1% of the start, wider overflows the loss), got "
            f"{span:g}"
        )
    grid = torch.linspace(-span, span, points, dtype=torch.float64).tolist()
    return tuple(sorted({*(round(a, 12) for a in grid), 0.0, 1.0}))


@torch.no_grad()
def loss_landscape(
    model: nn.Module,
    encoder: TextEncoder,
    features: Sequence[dict[str, Any]],
    task: str,
    label_names: Sequence[str],
    coefficients: Sequence[float] | None = None,
    *,
    batch_size: int = 64,
    progress: bool = False,
) -> Landscape:
    """Mean loss on `features` at theta0 + a (theta1 - theta0) for each coefficient a."""
    handle = get_handle(model)
    if handle.initial is None:
        raise ConfigError(
            "the adaptation kept no initial weights (adapt(..., keep_initial=False)); "
            "a loss landscape needs them"
        )
    params = dict(model.named_parameters())
    names = handle.trainable_names
    trained = {n: params[n].detach().clone() for n in names}
    losses = []
    grid = tuple(sorted(coefficients)) if coefficients is not None else alphas()
    try:
        for alpha in track(grid, "landscape", "point", enabled=progress):
            for name in names:
                start = handle.initial[name].to(params[name].device)
                params[name].copy_(torch.lerp(start, trained[name], alpha))  # exact at 0, 1
            result = evaluate(model, encoder, features, task, label_names, batch_size)
            losses.append(result.loss)
    finally:
        for name in names:
            params[name].copy_(trained[name])
    return Landscape(alphas=grid, losses=tuple(losses))


def check_finite(curve: Landscape) -> None:
    """Refuse, in one line, a landscape with a NaN or infinite loss: a diverged curve is not a
    result, and the message says where it diverged and what to change."""
    pairs = zip(curve.alphas, curve.losses, strict=True)
    bad = [(a, loss) for a, loss in pairs if not math.isfinite(loss)]
    if not bad:
        return
    where = ", ".join(f"{loss} at alpha {a:g}" for a, loss in bad[:3])
    where += f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    ends = {a for a, _ in bad} & {0.0, 1.0}
    if 1.0 in ends:
        advice = "the trained model itself gives it, so the run diverged; train it again"
    elif ends:
        advice = "the starting model itself gives it; are its weights finite?"
    else:
        advice = "the weights interpolated that far overflow the loss; lower --span"
    raise DataError(f"the loss landscape diverged (loss {where}); {advice}")

"""What a combination of trained adapters is: the how, one weight per source and the options of
its rule, each checked in one line when it is wrong.

The hows are PEFT's `add_weighted_adapter` names, but for linear: `linear` is the weighted sum
of the sources' updates for every method (on LoRA the stacked pairs, PEFT's `cat`), and PEFT's
`linear`, which on LoRA merges A and B apart, is called `peft_linear` (`PEFT_TYPES`).

The rules themselves (`adaptlab.methods.combine_rules`) act on tensors, and LoRA pairs are
combined by `adaptlab.methods.combine_math`; this module loads no torch, so a study's spec
checks its `combine:` options without it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adaptlab.checks import seed as checked_seed
from adaptlab.checks import shown
from adaptlab.methods.config import require

HOWS: tuple[str, ...] = (
    "linear",
    "peft_linear",
    "cat",
    "svd",
    "ties",
    "ties_svd",
    "dare_linear",
    "dare_ties",
    "dare_linear_svd",
    "dare_ties_svd",
    "magnitude_prune",
    "magnitude_prune_svd",
)
SIGN_RULES = ("total", "frequency")
PEFT_TYPES = {"linear": "cat", "peft_linear": "linear"}
"""The hows whose LoRA pairs PEFT's `add_weighted_adapter` gives under another
`combination_type`; every other how is PEFT's own name."""

PRUNING_RULES = ("ties", "dare_linear", "dare_ties", "magnitude_prune")
"""The rules that keep a `density` fraction of each task tensor."""
SIGN_ELECTING_RULES = ("ties", "dare_ties")
"""The rules that elect a sign per entry (`majority_sign`)."""
_FLOAT32_MAX = 3.4028234663852886e38
"""torch.finfo(torch.float32).max: combined tensors are float32."""
_WHAT = "combine"


@dataclass(frozen=True)
class Combination:
    """How to combine: `how` (one of HOWS), one weight per source (negative allowed: task
    negation), `density` (fraction kept by ties / dare / magnitude_prune, in (0, 1]; required
    for those, refused for the others), `rank` (of the _svd variants' result; None: the largest
    source rank; refused for non-svd hows), `majority_sign` (TIES's sign election: total |
    frequency), `seed` (of DARE's random masks)."""

    how: str
    weights: tuple[float, ...]
    density: float | None = None
    rank: int | None = None
    majority_sign: str = "total"
    seed: int = 0

    def __post_init__(self) -> None:
        require(
            self.how in HOWS, _WHAT, f"how {shown(self.how)} is unknown; hows: {', '.join(HOWS)}"
        )
        object.__setattr__(self, "weights", _checked_weights(self.weights))
        self._check_density()
        self._check_rank()
        require(
            self.majority_sign in SIGN_RULES,
            _WHAT,
            f"majority_sign must be one of {', '.join(SIGN_RULES)}, "
            f"got {shown(self.majority_sign)}",
        )
        require(
            self.majority_sign == "total" or self.rule in SIGN_ELECTING_RULES,
            _WHAT,
            f"majority_sign applies to ties hows only, not to {self.how}; leave it out",
        )
        checked_seed(self.seed, f"{_WHAT}: seed")
        require(
            self.seed == 0 or self.random,
            _WHAT,
            f"seed applies to dare hows only (their random masks), not to {self.how}; leave it out",
        )

    def _check_density(self) -> None:
        """`density` is required by the pruning rules, in (0, 1], and refused by the others."""
        if self.rule not in PRUNING_RULES:
            require(
                self.density is None,
                _WHAT,
                f"density applies to ties, dare and magnitude_prune hows, not to {self.how}; "
                "leave it out",
            )
            return
        require(
            self.density is not None,
            _WHAT,
            f"how {self.how} needs a density (the fraction of each tensor kept), in (0, 1]",
        )
        density = self.density
        number = isinstance(density, int | float) and not isinstance(density, bool)
        require(
            number and 0 < density <= 1,  # type: ignore[operator]
            _WHAT,
            f"density must be a number in (0, 1], got {shown(density)}",
        )
        object.__setattr__(self, "density", float(density))  # type: ignore[arg-type]

    def _check_rank(self) -> None:
        """`rank` is a positive integer for the _svd hows, refused by the others."""
        if self.rank is None:
            return
        require(self.svd, _WHAT, f"rank applies to svd hows only, not to {self.how}; leave it out")
        rank = self.rank
        require(
            isinstance(rank, int) and not isinstance(rank, bool) and rank >= 1,
            _WHAT,
            f"rank must be a positive integer, got {shown(rank)}",
        )

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (for a combined adapter's manifest)."""
        return {
            "how": self.how,
            "weights": list(self.weights),
            "density": self.density,
            "rank": self.rank,
            "majority_sign": self.majority_sign,
            "seed": self.seed,
        }

    @property
    def random(self) -> bool:
        """Whether the rule draws random masks (the dare hows)."""
        return self.rule in ("dare_linear", "dare_ties")

    @property
    def svd(self) -> bool:
        """Whether a LoRA result is the truncated SVD of the merged updates."""
        return self.how == "svd" or self.how.endswith("_svd")

    @property
    def rule(self) -> str:
        """The merge rule without "_svd" ("svd" and "peft_linear" merge by "linear"; "cat"
        stays "cat")."""
        return "linear" if self.how in ("svd", "peft_linear") else self.how.removesuffix("_svd")

    @property
    def lora_only(self) -> bool:
        """Whether the how combines LoRA pairs only: cat and the svd hows re-factorise the
        updates, peft_linear merges the factors."""
        return self.how in ("cat", "peft_linear") or self.svd

    @property
    def peft_type(self) -> str:
        """The `combination_type` of PEFT's `add_weighted_adapter` that gives the same LoRA
        pairs."""
        return PEFT_TYPES.get(self.how, self.how)


def _checked_weights(weights: object) -> tuple[float, ...]:
    """The weights as floats: at least one, each a finite number within float32's range, not
    all zero."""
    require(
        isinstance(weights, Sequence) and not isinstance(weights, str) and len(weights) > 0,
        _WHAT,
        f"weights must be a list of at least one number, got {shown(weights)}",
    )
    assert isinstance(weights, Sequence)
    for index, weight in enumerate(weights):
        number = isinstance(weight, int | float) and not isinstance(weight, bool)
        require(
            number and math.isfinite(weight) and abs(weight) <= _FLOAT32_MAX,
            _WHAT,
            f"weights must be finite numbers, got {shown(weight)} (weight {index + 1})",
        )
    require(
        any(weight != 0 for weight in weights),
        _WHAT,
        "weights are all zero, which combines into nothing; give at least one non-zero weight",
    )
    return tuple(float(weight) for weight in weights)

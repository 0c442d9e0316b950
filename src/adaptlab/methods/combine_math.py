"""The tensor arithmetic of combining trained adapters into one: weighted sums, TIES, DARE,
magnitude pruning, and SVD back to a low-rank pair.

Every rule acts on task tensors (an adapter's parameters, or their change from a base) with
one weight per source (a negative weight subtracts a task):

- linear: task arithmetic, sum w_i t_i (Ilharco et al. 2023, "Editing Models with Task
  Arithmetic", §2).
- magnitude_prune: each t_i keeps its top `density` fraction of entries by magnitude, then
  the weighted sum.
- ties: TIES-Merging (Yadav et al. 2023, §3): trim each t_i as above, elect one sign per entry
  (total: the sign of the sum of the trimmed tensors; frequency: the sign of the sum of their
  signs; zero counts as +), then the disjoint merge: the mean of w_i t_i over the sources whose
  trimmed entry has the elected sign (over at least one).
- dare_linear / dare_ties: DARE (Yu et al. 2024, "Language Models are Super Mario", §3): drop
  each entry with probability 1 - density and rescale what is kept by 1 / density, then linear
  / ties (the sign election of ties on the rescaled tensors).

A density of 1 prunes nothing (and DARE then draws nothing). For LoRA, `combine_lora` either
stacks the pairs (cat, exact), merges A and B apart with the square root of each weight on
each side (the sign on A's side), or merges the full updates and takes the truncated SVD
(the _svd hows). The numbers are those of PEFT's `add_weighted_adapter` on the same inputs,
with one difference: a single source is combined by the rule asked for (an _svd how then
lowers its rank), where PEFT falls back to linear.

Random draws: DARE takes one Bernoulli mask per task tensor from the generator, in the order
the tensors are merged: for a non-svd LoRA layer every source's A (sources in order) then every
source's B; for an _svd how one mask per source's full update. Over layers taken in the
model's module order this is PEFT's order, so a generator seeded with s draws PEFT's masks when
torch's global generator is seeded with s just before PEFT's merge loop. Everything is computed
in float32, whatever the inputs' dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from adaptlab.checks import seed as checked_seed
from adaptlab.checks import shown
from adaptlab.errors import ConfigError
from adaptlab.methods.config import require

HOWS: tuple[str, ...] = (
    "linear",
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

PRUNING_RULES = ("ties", "dare_linear", "dare_ties", "magnitude_prune")
"""The rules that keep a `density` fraction of each task tensor."""
SIGN_ELECTING_RULES = ("ties", "dare_ties")
"""The rules that elect a sign per entry (`majority_sign`)."""
_FLOAT32_MAX = float(torch.finfo(torch.float32).max)
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
        """The merge rule without "_svd" ("svd" merges by "linear"; "cat" stays "cat")."""
        return "linear" if self.how == "svd" else self.how.removesuffix("_svd")


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


def merge_tensors(
    tensors: Sequence[torch.Tensor],
    weights: Sequence[float],
    combination: Combination,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """The merge rule of `combination` (combination.rule) over same-shape task tensors, with
    `weights` (one per tensor; apart from combination.weights because LoRA passes per-side
    weights). DARE's masks come from `generator` (None: torch's global generator), one per
    tensor in order. Float32, on the tensors' device."""
    rule = combination.rule
    if rule == "cat":
        raise ConfigError(f"{_WHAT}: how cat stacks LoRA pairs; it does not merge tensors")
    _check_same_shapes(tensors, len(weights))
    floats = [tensor.to(torch.float32) for tensor in tensors]
    density = combination.density
    if density is not None and density < 1:
        if rule in ("ties", "magnitude_prune"):
            floats = [_magnitude_trimmed(tensor, density) for tensor in floats]
        else:
            floats = [_randomly_dropped(tensor, density, generator) for tensor in floats]
    scales = torch.tensor(list(weights), dtype=torch.float32, device=floats[0].device)
    if rule in SIGN_ELECTING_RULES:
        return _disjoint_mean(floats, scales, combination.majority_sign)
    return _weighted_sum(floats, scales)


def _check_same_shapes(tensors: Sequence[torch.Tensor], weights: int) -> None:
    """At least one tensor, one weight each, all of one shape."""
    require(
        len(tensors) > 0 and len(tensors) == weights,
        _WHAT,
        f"{weights} weights for {len(tensors)} sources; give one weight per source",
    )
    shapes = {tuple(tensor.shape) for tensor in tensors}
    require(
        len(shapes) == 1,
        _WHAT,
        f"the sources' tensors differ in shape ({', '.join(map(str, sorted(shapes)))}); "
        "combine adapters of one base model",
    )


def _magnitude_trimmed(tensor: torch.Tensor, density: float) -> torch.Tensor:
    """`tensor` with all but its int(density * numel) largest-magnitude entries set to zero
    (TIES's trim step; of entries tied at the cut, the first in flat order are kept)."""
    keep = int(density * tensor.numel())
    magnitudes = tensor.abs().flatten()
    if keep == 0:
        return torch.zeros_like(tensor)
    cut = magnitudes.kthvalue(magnitudes.numel() - keep + 1).values
    kept = magnitudes > cut
    missing = keep - int(kept.sum())
    if missing > 0:  # entries equal to the cut fill the places left, first ones first
        at_cut = magnitudes == cut
        kept |= at_cut & (at_cut.cumsum(0) <= missing)
    return tensor * kept.view_as(tensor)


def _randomly_dropped(
    tensor: torch.Tensor, density: float, generator: torch.Generator | None
) -> torch.Tensor:
    """DARE's drop and rescale: each entry kept with probability `density` (one Bernoulli
    mask drawn from `generator`), what is kept divided by `density`."""
    mask = torch.bernoulli(torch.full_like(tensor, density), generator=generator)
    return tensor * mask / density


def _weighted_sum(tensors: Sequence[torch.Tensor], weights: torch.Tensor) -> torch.Tensor:
    """Task arithmetic: sum w_i t_i."""
    total = tensors[0] * weights[0]
    for tensor, weight in zip(tensors[1:], weights[1:], strict=True):
        total += tensor * weight
    return total


def _disjoint_mean(
    tensors: Sequence[torch.Tensor], weights: torch.Tensor, majority_sign: str
) -> torch.Tensor:
    """TIES's sign election and disjoint merge: per entry, the mean of w_i t_i over the
    sources whose t_i has the elected sign (the count clamped to at least 1)."""
    voters = tensors if majority_sign == "total" else [tensor.sign() for tensor in tensors]
    votes = voters[0].clone()
    for voter in voters[1:]:
        votes += voter
    elected = torch.where(votes >= 0, 1.0, -1.0)
    total = torch.zeros_like(tensors[0])
    agreeing = torch.zeros_like(tensors[0])
    for tensor, weight in zip(tensors, weights, strict=True):
        agrees = tensor.sign() == elected
        total += tensor * weight * agrees
        agreeing += agrees
    return total / agreeing.clamp(min=1.0)


def result_rank(ranks: Sequence[int], combination: Combination) -> int:
    """The rank of the combined LoRA: cat: the sum; svd hows: combination.rank or the
    largest; the others: the sources' common rank (different ranks are refused)."""
    if combination.how == "cat":
        return sum(ranks)
    if combination.svd:
        return combination.rank or max(ranks)
    require(
        len(set(ranks)) == 1,
        _WHAT,
        f"how {combination.how} needs sources of one rank, got ranks "
        f"{', '.join(map(str, ranks))}; use cat or {_svd_how(combination.how)}",
    )
    return ranks[0]


def _svd_how(how: str) -> str:
    """The _svd how that merges like `how` and accepts any ranks."""
    return "svd" if how == "linear" else f"{how}_svd"


def combine_lora(
    pairs: Sequence[tuple[torch.Tensor, torch.Tensor, float]],
    combination: Combination,
    generator: torch.Generator | None,
    sources: Sequence[int] | None = None,
    rank: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One layer's combined LoRA pair (A', B') from each source's (A, B, scaling), A (r x in),
    B (out x r), to be used with scaling 1 (alpha = the result's rank):

    - cat: A' = cat_i(w_i s_i A_i) over rows, B' = cat_i(B_i) over columns;
    - linear, ties, dare_*, magnitude_prune: A and B merged apart with the weights
      sign(w_i s_i) sqrt(|w_i s_i|) for A and sqrt(|w_i s_i|) for B (ranks must be equal);
    - svd hows: the rule over the full updates s_i B_i A_i with the weights w_i, then the
      truncated SVD U S Vh of the result: B' = U[:, :k] diag(S[:k]), A' = Vh[:k].

    `sources`: the indices (into combination.weights) of the sources present at this layer,
    one per pair (default: all); a source without this layer adds nothing here. `rank`: the
    result's rank over all sources (`result_rank`; default: from the pairs given), which cat
    reaches with zero rows of A' and columns of B' (those of the sources absent here) and an
    svd how with zeros past the layer's own rank."""
    weights = _present_weights(combination, sources, len(pairs))
    a_sides = [a.to(torch.float32) for a, _, _ in pairs]
    b_sides = [b.to(torch.float32) for _, b, _ in pairs]
    _check_pairs(a_sides, b_sides)
    ranks = [a.shape[0] for a in a_sides]
    own = result_rank(ranks, combination)
    target = own if rank is None else rank
    products = [weight * scaling for weight, (_, _, scaling) in zip(weights, pairs, strict=True)]
    if combination.how == "cat":
        if target < own:
            raise ValueError(f"rank {target} is below the {own} rows the pairs hold")
        stacked_a = torch.cat([a * p for a, p in zip(a_sides, products, strict=True)], dim=0)
        return _padded(stacked_a, torch.cat(b_sides, dim=1), target)
    if combination.svd:
        updates = [(b @ a) * s for a, b, (_, _, s) in zip(a_sides, b_sides, pairs, strict=True)]
        merged = merge_tensors(updates, weights, combination, generator)
        return _truncated_svd(merged, target)
    if target != own:
        raise ValueError(f"rank {target} differs from the pairs' common rank {own}")
    roots = [math.sqrt(abs(product)) for product in products]
    signed = [root if p >= 0 else -root for root, p in zip(roots, products, strict=True)]
    merged_a = merge_tensors(a_sides, signed, combination, generator)
    merged_b = merge_tensors(b_sides, roots, combination, generator)
    return merged_a, merged_b


def _present_weights(
    combination: Combination, sources: Sequence[int] | None, count: int
) -> list[float]:
    """The weights of the `count` sources present (`sources`: their indices; None: all)."""
    weights = combination.weights
    if sources is None:
        require(
            count == len(weights),
            _WHAT,
            f"{len(weights)} weights for {count} sources; give one weight per source",
        )
        return list(weights)
    if len(sources) != count or any(not 0 <= index < len(weights) for index in sources):
        raise ValueError(f"sources {list(sources)} do not index {count} of {len(weights)} weights")
    return [weights[index] for index in sources]


def _check_pairs(a_sides: Sequence[torch.Tensor], b_sides: Sequence[torch.Tensor]) -> None:
    """At least one pair; every A (r_i x in) and B (out x r_i) of one layer's shape."""
    require(len(a_sides) > 0, _WHAT, "no source has this layer; nothing to combine")
    described = ", ".join(
        f"A {tuple(a.shape)} B {tuple(b.shape)}" for a, b in zip(a_sides, b_sides, strict=True)
    )
    fits = all(
        a.dim() == 2 and b.dim() == 2 and a.shape[0] == b.shape[1]
        for a, b in zip(a_sides, b_sides, strict=True)
    )
    require(
        fits
        and len({(b.shape[0], a.shape[1]) for a, b in zip(a_sides, b_sides, strict=True)}) == 1,
        _WHAT,
        f"the sources' LoRA pairs do not fit one layer ({described}); "
        "combine adapters of one base model",
    )


def _padded(a: torch.Tensor, b: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(A, B) brought to `rank` with zero rows of A and zero columns of B (same product)."""
    missing = rank - a.shape[0]
    if missing == 0:
        return a, b
    a_rows = a.new_zeros(missing, a.shape[1])
    b_columns = b.new_zeros(b.shape[0], missing)
    return torch.cat([a, a_rows], dim=0), torch.cat([b, b_columns], dim=1)


def _truncated_svd(update: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The best rank-`rank` factors (A', B') of `update`: B' = U_k diag(S_k), A' = Vh_k (the
    reduced SVD: only min(out, in) singular vectors are computed)."""
    left, singular, right = torch.linalg.svd(update, full_matrices=False)
    kept = min(rank, singular.shape[0])
    a = right[:kept]
    b = left[:, :kept] * singular[:kept]
    return _padded(a, b, rank)


def combine_deltas(
    tensors: Sequence[torch.Tensor],
    combination: Combination,
    generator: torch.Generator | None,
    base: torch.Tensor | None = None,
    sources: Sequence[int] | None = None,
) -> torch.Tensor:
    """Any parameter other than a LoRA pair (a bottleneck adapter's weights, an (IA)3 vector,
    a bias): the rule applied to the deltas t_i - base (base None: the tensors themselves)
    with the weights w_i, plus base. `linear` with weights summing to 1 is the weighted
    average. `sources` as in `combine_lora`. cat and the svd hows combine LoRA pairs only."""
    if combination.how == "cat" or combination.svd:
        raise ConfigError(
            f"{_WHAT}: how {combination.how} combines LoRA pairs only; adapters with other "
            f"parameters combine with {', '.join(('linear', *PRUNING_RULES))}"
        )
    weights = _present_weights(combination, sources, len(tensors))
    if base is None:
        return merge_tensors(tensors, weights, combination, generator)
    _check_same_shapes([*tensors, base], len(tensors) + 1)
    origin = base.to(torch.float32)
    deltas = [tensor.to(torch.float32) - origin for tensor in tensors]
    return merge_tensors(deltas, weights, combination, generator) + origin

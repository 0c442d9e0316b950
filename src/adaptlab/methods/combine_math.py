"""Combining trained adapters' tensors into one: LoRA pairs (stacked, merged factor by factor,
or merged as full updates and re-factorised by SVD) and any other parameter as deltas from a
base, each by a merge rule of `adaptlab.methods.combine_rules`.

For LoRA, `combine_lora` either stacks the pairs (linear and cat: exactly the weighted sum of the
updates, of any ranks), merges A and B apart with the square root of each weight on each side
(the sign on A's side: peft_linear and the non-svd pruning hows, as PEFT does; not the weighted
sum of the updates, so sources of one rank only), or merges the full updates and takes the
truncated SVD (the _svd hows). The numbers are those of PEFT's `add_weighted_adapter` with the
`combination_type` `Combination.peft_type` names, with one difference: a single source is
combined by the rule asked for (an _svd how then lowers its rank), where PEFT falls back to
linear.

Random draws: DARE takes one Bernoulli mask per task tensor from the generator, in the order
the tensors are merged: for a layer merged factor by factor every source's A (sources in order)
then every source's B; for an _svd how one mask per source's full update. Over layers taken in
the model's module order this is PEFT's order, so a generator seeded with s draws PEFT's masks
when torch's global generator is seeded with s just before PEFT's merge loop. Everything is
computed in float32, whatever the inputs' dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from adaptlab.errors import ConfigError
from adaptlab.methods.combination import PRUNING_RULES, Combination
from adaptlab.methods.combine_rules import check_same_shapes, merge_tensors
from adaptlab.methods.config import require

_WHAT = "combine"
_STACKING_HOWS = ("linear", "cat")
"""The hows that stack LoRA pairs: the exact weighted sum of the updates, of any ranks."""


def result_rank(ranks: Sequence[int], combination: Combination) -> int:
    """The rank of the combined LoRA: linear and cat: the sum; svd hows: combination.rank or
    the largest; the others (merging A and B apart): the sources' common rank (different ranks
    are refused)."""
    if combination.how in _STACKING_HOWS:
        return sum(ranks)
    if combination.svd:
        return combination.rank or max(ranks)
    require(
        len(set(ranks)) == 1,
        _WHAT,
        f"how {combination.how} merges LoRA's A and B apart, which needs sources of one rank, "
        f"got ranks {', '.join(map(str, ranks))}; use linear (the exact weighted sum) or "
        f"{_svd_how(combination)}",
    )
    return ranks[0]


def _svd_how(combination: Combination) -> str:
    """The _svd how that merges like `combination` and accepts any ranks."""
    rule = combination.rule
    return "svd" if rule == "linear" else f"{rule}_svd"


def combine_lora(
    pairs: Sequence[tuple[torch.Tensor, torch.Tensor, float]],
    combination: Combination,
    generator: torch.Generator | None,
    sources: Sequence[int] | None = None,
    rank: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One layer's combined LoRA pair (A', B') from each source's (A, B, scaling), A (r x in),
    B (out x r), to be used with scaling 1 (alpha = the result's rank):

    - linear, cat: A' = cat_i(w_i s_i A_i) over rows, B' = cat_i(B_i) over columns, so that
      B' A' = sum_i w_i s_i B_i A_i exactly;
    - peft_linear, ties, dare_*, magnitude_prune: A and B merged apart with the weights
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
    if combination.how in _STACKING_HOWS:
        if target < own:
            raise ValueError(f"rank {target} is below the {own} rows the pairs hold")
        stacked_a = torch.cat([a * p for a, p in zip(a_sides, products, strict=True)], dim=0)
        return _padded(stacked_a, torch.cat(b_sides, dim=1), target)
    if combination.svd:
        updates = [(b @ a).mul_(s) for a, b, (_, _, s) in zip(a_sides, b_sides, pairs, strict=True)]
        merged = merge_tensors(updates, weights, combination, generator)
        del updates  # only the merged update stays beside the SVD's work
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
    """The best rank-`rank` factors (A', B') of `update`: B' = U_k diag(S_k), A' = Vh_k. The
    reduced SVD computes only min(out, in) singular vectors, the leading ones the same as those
    of PEFT's full SVD (LAPACK's gesdd reaches both the same way), in less time on a tall or
    wide update (a third less on a 5632 x 2048 one)."""
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
    average. `sources` as in `combine_lora`. cat, peft_linear and the svd hows combine LoRA
    pairs only."""
    if combination.lora_only:
        raise ConfigError(
            f"{_WHAT}: how {combination.how} combines LoRA pairs only; adapters with other "
            f"parameters combine with {', '.join(('linear', *PRUNING_RULES))}"
        )
    weights = _present_weights(combination, sources, len(tensors))
    if base is None:
        return merge_tensors(tensors, weights, combination, generator)
    check_same_shapes([*tensors, base], len(tensors) + 1)
    origin = base.to(torch.float32)
    deltas = [tensor.to(torch.float32) - origin for tensor in tensors]
    return merge_tensors(deltas, weights, combination, generator) + origin

"""The merge rules of combining trained adapters, on same-shape task tensors (an adapter's
parameters, or their change from a base) with one weight per source (a negative weight
subtracts a task):

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

A density of 1 prunes nothing (and DARE then draws nothing). The numbers are those of PEFT's
`peft.utils.merge_utils` on the same inputs (DARE's masks too, from the same generator state);
everything is computed in float32, whatever the inputs' dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from adaptlab.errors import ConfigError
from adaptlab.methods.combination import SIGN_ELECTING_RULES, Combination
from adaptlab.methods.config import require

_WHAT = "combine"
_SAMPLE = 1 << 16
"""Entries of a tensor sampled to bracket its k-th largest magnitude (`_kth_largest`); tensors
of up to 4 times as many are selected from whole."""
_CHUNK = 1 << 20
"""Entries of the task tensors the disjoint merge takes at a time: its temporaries then stay
4 MB and are reused, where whole-tensor ones would each be fresh memory pages (twice the time)."""


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
    check_same_shapes(tensors, len(weights))
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


def check_same_shapes(tensors: Sequence[torch.Tensor], weights: int) -> None:
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
    if keep == 0:
        return torch.zeros_like(tensor)
    magnitudes = tensor.abs().flatten()
    cut = _kth_largest(magnitudes, keep)
    kept = magnitudes >= cut
    extra = int(torch.count_nonzero(kept)) - keep
    if extra > 0:  # more entries equal the cut than places are left: the last of them go
        tied = torch.nonzero(magnitudes == cut).flatten()
        kept[tied[-extra:]] = False
    return tensor * kept.view_as(tensor)


def _kth_largest(values: torch.Tensor, k: int) -> torch.Tensor:
    """The k-th largest of the flat `values` (1 <= k <= numel), the value `kthvalue` selects.

    A large tensor is selected from as in Floyd and Rivest's SELECT (1975, "Expected time
    bounds for selection", CACM 18(3)): a strided sample of about `_SAMPLE` entries brackets
    the k-th largest between two of its order statistics, 3 sqrt(sample) places either side of
    its expected place in the sample (at least 6 standard deviations of that place), and only
    the few entries inside the bracket are selected from; a bracket that misses (many ties, an
    order the stride aliases with) falls back to the whole tensor."""
    count = values.numel()
    if count > 4 * _SAMPLE:
        sample = values[:: count // _SAMPLE].sort(descending=True).values
        size = sample.numel()
        place = k * size / count  # the k-th largest's expected place in the sample, from 0
        margin = 3 * math.sqrt(size)
        high = sample[max(int(place - margin), 0)]
        low = sample[min(int(place + margin), size - 1)]
        above = int(torch.count_nonzero(values > high))
        inside = values[(values <= high) & (values >= low)]
        if above < k <= above + inside.numel():
            return inside.kthvalue(inside.numel() - (k - above) + 1).values
    return values.kthvalue(count - k + 1).values


def _randomly_dropped(
    tensor: torch.Tensor, density: float, generator: torch.Generator | None
) -> torch.Tensor:
    """DARE's drop and rescale: each entry kept with probability `density` (one Bernoulli
    mask drawn from `generator`), what is kept divided by `density`."""
    mask = torch.bernoulli(torch.full_like(tensor, density), generator=generator)
    return mask.mul_(tensor).div_(density)


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
    sources whose t_i has the elected sign (the count clamped to at least 1). Entry by entry,
    so `_CHUNK` entries at a time."""
    flat = [tensor.reshape(-1) for tensor in tensors]
    merged = torch.empty_like(flat[0])
    for start in range(0, merged.numel(), _CHUNK):
        end = start + _CHUNK
        merged[start:end] = _elected_mean([t[start:end] for t in flat], weights, majority_sign)
    return merged.view_as(tensors[0])


def _elected_mean(
    tensors: Sequence[torch.Tensor], weights: torch.Tensor, majority_sign: str
) -> torch.Tensor:
    """The sign election and disjoint merge of one chunk of each task tensor."""
    voters = tensors if majority_sign == "total" else [tensor.sign() for tensor in tensors]
    votes = voters[0].clone()
    for voter in voters[1:]:
        votes += voter
    elected = torch.where(votes >= 0, 1.0, -1.0)
    total = torch.zeros_like(tensors[0])
    agreeing = torch.zeros_like(tensors[0], dtype=torch.int32)
    for tensor, weight in zip(tensors, weights, strict=True):
        agrees = tensor * elected > 0  # a non-zero entry of the elected sign
        total.addcmul_(tensor * weight, agrees)
        agreeing += agrees
    return total.div_(agreeing.clamp_(min=1))

"""What the tensors of a file from someone else hold: the checks every loader of such files runs
(adapter folders, PEFT adapters, a base model's weights).

A checksum only says that a file is the one its manifest describes; whoever edits one can
recompute the other. So the tensors themselves are checked before they go into a model: a dtype
adaptlab writes, finite values of a size trained weights have, the shapes the model needs and
as many tensors as the manifest lists. Each check returns what is wrong in a phrase naming the
tensor (None when nothing is), and the loader raises its own error naming the file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import safetensors.torch
import torch

from adaptlab.errors import AdaptlabError

MAX_MAGNITUDE = 1e6
"""The largest |value| an adapter tensor may hold. Trained transformer weights stay within tens
to hundreds (LayerNorm gains and the outlier features of large LMs are the largest), and
float16, which half-precision models keep their weights in, stops at 65,504: past 1e6 is no
trained weight. Below it, a forward pass cannot overflow float32: a weight of 1e6 times
activations in the thousands, summed over tens of thousands of features, stays near 1e14, and
even its square (a LayerNorm's variance) near 1e28, under float32's 3.4e38; a value of 1e38
overflows at once and the outputs become inf and NaN."""

SAVED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
"""The dtypes of the tensors adaptlab writes: float32, the dtype it loads models in (and the one
mixed precision keeps its master weights in), and float16 / bfloat16, which the copies of a
half-precision model's own weights keep when such a model is adapted through the Python API.
It never writes float64 or integer tensors, so a file holding them was made elsewhere."""

_CHUNK = 1 << 22
"""Values looked at together: the scratch memory of a check stays at 16 MB for float32."""


def read_tensor_file(path: Path, error: type[AdaptlabError]) -> dict[str, torch.Tensor]:
    """The tensors of the safetensors file at `path`, each checked by `content_problem`; `error`
    (one line naming the file) when it cannot be read or a tensor is refused."""
    try:
        tensors = safetensors.torch.load_file(str(path))
    except Exception as reason:  # safetensors raises its own error types for bad headers
        raise error(f"{path}: cannot be read as safetensors ({reason})") from None
    problem = content_problem(tensors)
    if problem is not None:
        raise error(f"{path}: {problem}; the file is damaged or was edited: get an intact copy")
    return tensors


def content_problem(tensors: Mapping[str, torch.Tensor]) -> str | None:
    """The first tensor whose dtype adaptlab never writes (`SAVED_DTYPES`) or whose values are
    not finite or pass `MAX_MAGNITUDE`, described with its name; None when all are fine."""
    for name, tensor in tensors.items():
        if tensor.dtype not in SAVED_DTYPES:
            kinds = ", ".join(str(d).removeprefix("torch.") for d in SAVED_DTYPES)
            dtype = str(tensor.dtype).removeprefix("torch.")
            return (
                f"tensor {name!r} is {dtype}, not one of the dtypes adapters are saved in ({kinds})"
            )
        problem = value_problem(tensor)
        if problem is not None:
            return f"tensor {name!r} {problem}"
    return None


def value_problem(tensor: torch.Tensor, limit: float = MAX_MAGNITUDE) -> str | None:
    """Whether `tensor` holds NaN, an infinity or a value past `limit` in size, as a phrase."""
    if tensor.numel() == 0 or not tensor.is_floating_point():
        return None
    chunks = tensor.detach().reshape(-1).split(_CHUNK)  # bounded scratch memory
    peak = torch.stack([chunk.abs().amax() for chunk in chunks]).amax().item()  # NaN if any
    if math.isnan(peak):
        return "holds NaN"
    if math.isinf(peak):
        return "holds an infinite value"
    if peak > limit:
        return f"holds a value of size {peak:.3g}; trained weights stay under {limit:,.0f}"
    return None


def fit_problem(name: str, tensor: torch.Tensor, target: torch.Tensor) -> str | None:
    """Why `tensor` cannot be copied into the model's `target`: another shape, or values that
    `target`'s dtype cannot hold (float16 stops at 65,504); None when it fits."""
    if tuple(tensor.shape) != tuple(target.shape):
        return (
            f"tensor {name!r} has shape {tuple(tensor.shape)} in the adapter but "
            f"{tuple(target.shape)} in this model"
        )
    if target.is_floating_point() and value_problem(tensor, torch.finfo(target.dtype).max):
        dtype = str(target.dtype).removeprefix("torch.")
        return f"tensor {name!r} holds values that this model's {dtype} cannot hold"
    return None


def count_problem(tensors: Mapping[str, torch.Tensor], count: int, parameters: int) -> str | None:
    """Whether the file holds other than the `count` tensors and `parameters` values its
    manifest lists, as a phrase."""
    found = sum(t.numel() for t in tensors.values())
    if len(tensors) != count:
        return f"the manifest lists {count} tensors (tensors.count), the file holds {len(tensors)}"
    if found != parameters:
        return f"the manifest lists {parameters:,} values (tensors.parameters), the file {found:,}"
    return None

"""A short hash of a base model's pretrained weights, so adapters refuse the wrong base."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import torch
from torch import nn


def fingerprint(model: nn.Module, exclude: Iterable[str] = ()) -> str:
    """SHA-256 (16 hex digits) over names, shapes and float32 values of `model`'s parameters.

    Modules named in `exclude` (the task head, which is freshly initialised on every load)
    and everything under them are left out.
    """
    prefixes = tuple(f"{name}." for name in exclude)
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        if name.startswith(prefixes) or not torch.is_floating_point(tensor):
            continue
        digest.update(f"{name}:{tuple(tensor.shape)};".encode())
        data = tensor.detach().to("cpu", torch.float32).contiguous()
        digest.update(data.view(torch.uint8).numpy())  # hashed in place: no copy of the bytes
    return digest.hexdigest()[:16]

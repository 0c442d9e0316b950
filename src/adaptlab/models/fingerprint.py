"""A short hash of a base model's pretrained weights, so adapters refuse the wrong base.

A model whose weights are about to change in place (quantised: `adaptlab.models.quantize`)
keeps the hash of its original weights (`record_fingerprint`), and `fingerprint` answers that
one from then on, so adapters move between the quantised base and the full-precision one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import torch
from torch import nn

RECORD_ATTRIBUTE = "_adaptlab_fingerprint"
"""Set on a model by `record_fingerprint`: (the modules left out, the hash)."""


def fingerprint(model: nn.Module, exclude: Iterable[str] = ()) -> str:
    """SHA-256 (16 hex digits) over names, shapes and float32 values of `model`'s parameters.

    Modules named in `exclude` (the task head, which is freshly initialised on every load)
    and everything under them are left out. A model with a recorded fingerprint answers the
    recorded one (asked with the same `exclude`).
    """
    exclude = tuple(exclude)
    recorded: tuple[tuple[str, ...], str] | None = getattr(model, RECORD_ATTRIBUTE, None)
    if recorded is not None:
        if recorded[0] != exclude:
            raise ValueError(
                f"this model's fingerprint was recorded leaving out {recorded[0]}, not {exclude}"
            )
        return recorded[1]
    prefixes = tuple(f"{name}." for name in exclude)
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        if name.startswith(prefixes) or not torch.is_floating_point(tensor):
            continue
        digest.update(f"{name}:{tuple(tensor.shape)};".encode())
        data = tensor.detach().to("cpu", torch.float32).contiguous()
        digest.update(data.view(torch.uint8).numpy())  # hashed in place: no copy of the bytes
    return digest.hexdigest()[:16]


def record_fingerprint(model: nn.Module, exclude: Iterable[str] = ()) -> str:
    """Hash `model` now and keep the hash on it: `fingerprint` answers it from then on, whatever
    happens to the weights (call it before they change in place). Returns the hash."""
    exclude = tuple(exclude)
    digest = fingerprint(model, exclude)
    setattr(model, RECORD_ATTRIBUTE, (exclude, digest))
    return digest

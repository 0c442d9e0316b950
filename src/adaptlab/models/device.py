"""The torch device a command runs on, checked before any model is loaded."""

from __future__ import annotations

import torch

from adaptlab.errors import ConfigError


def torch_device(name: str) -> torch.device:
    """`name` (cpu, cuda, cuda:N, mps) as a device; one this machine lacks is an error."""
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"unknown device {name!r}; use cpu, cuda, cuda:N or mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} asked for, but CUDA is not available here")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise ConfigError(f"device {name!r}: this machine has {torch.cuda.device_count()} GPUs")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"device {name!r} asked for, but MPS is not available here")
    return device

"""The torch device a command runs on, checked before any model is loaded.

"auto" (every command's default) is the best device this machine has: CUDA, then Apple's MPS,
then the CPU.
"""

from __future__ import annotations

import torch

from adaptlab.errors import ConfigError

AUTO = "auto"


def device_name(name: str) -> str:
    """`name` with "auto" resolved to cuda, mps or cpu (other names unchanged)."""
    if name != AUTO:
        return name
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def torch_device(name: str) -> torch.device:
    """`name` (auto, cpu, cuda, cuda:N, mps) as a device; one this machine lacks is an error."""
    name = device_name(name)
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"unknown device {name!r}; use auto, cpu, cuda, cuda:N or mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} asked for, but CUDA is not available here")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise ConfigError(f"device {name!r}: this machine has {torch.cuda.device_count()} GPUs")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"device {name!r} asked for, but MPS is not available here")
    return device


def describe_device(device: torch.device) -> str:
    """The device as a user knows it: "cuda:0 (NVIDIA H100 80GB HBM3)", "cpu"."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return device.type


def auto_precision(name: str) -> str:
    """What precision "auto" means on device `name`: bf16 on a GPU that computes in it,
    fp32 elsewhere. It is decided on this machine, so a CUDA device it lacks is an error."""
    if torch.device(name).type != "cuda":
        return "fp32"
    if not torch.cuda.is_available():
        raise ConfigError(
            f"precision auto is decided on the machine that makes the run, and this one has no "
            f"CUDA for device {name!r}; give the precision (bf16, fp16 or fp32)"
        )
    return "bf16" if torch.cuda.is_bf16_supported() else "fp32"

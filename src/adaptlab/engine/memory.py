"""Peak memory of a stretch of work: CUDA allocator peaks, or the process's peak RSS on CPU."""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def reset_peak_memory(device: torch.device) -> None:
    """Start a new peak: CUDA's counter, or Linux's VmHWM (by writing 5 to clear_refs)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    with contextlib.suppress(OSError):  # elsewhere the peak covers the whole process
        _CLEAR_REFS.write_text("5")


def peak_memory_bytes(device: torch.device) -> int | None:
    """Bytes at the peak since the last reset; None where the platform cannot tell."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None

"""Training-step measurement shared by every benchmark worker, whatever library built the model.

Imports only torch and the standard library, so the same code runs in adaptlab's environment
(transformers 5) and in the `adapters` environment (transformers 4.57).

Memory definition (Linux): the peak resident set size (VmHWM) reached during the training steps
(warm-up included: AdamW allocates its state on the first step) minus the resident set size
just before the first step, after the model was loaded and adapted, the optimizer built and the
batch made, with garbage collected and glibc's free memory trimmed; the kernel's high-water mark
is reset at that point (``/proc/self/clear_refs``). So it is what training adds on top of the
weights: gradients, optimizer state, activations and allocator slack. It is process-wide, so run
one configuration per fresh process.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import re
import resource
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

MEMORY_DEFINITION = (
    "peak RSS during training steps (VmHWM, reset before step 1) minus RSS before step 1 "
    "(model loaded+adapted and every weight read once, optimizer and batch built); one fresh "
    "process per configuration"
)


@dataclass
class StepMeasurement:
    """Timed training steps and the memory they added, for one configuration in one process.

    `step_minor_faults` counts page faults per step (memory the allocator took fresh from the
    kernel, a real cost of freeing and re-allocating large tensors). `step_foreign_cpu` is, per
    timed step, the CPU time other processes used on the machine
    while it ran (system busy time minus this process's own CPU time, in seconds): on a small
    shared machine a step that competed for the cores is not a measurement of the method.
    """

    step_seconds: list[float]
    step_cpu_seconds: list[float]
    step_foreign_cpu: list[float]
    step_minor_faults: list[int]
    warmup_seconds: list[float]
    loss_first: float
    loss_last: float
    baseline_rss_bytes: int
    peak_rss_bytes: int
    peak_delta_bytes: int
    memory_method: str

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready mapping."""
        return asdict(self)


def configure_threads(threads: int) -> None:
    """Use `threads` intra-op threads and one inter-op thread, before any torch work runs."""
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)


def make_batch(
    vocab_size: int, batch_size: int, seq_len: int, seed: int
) -> dict[str, torch.Tensor]:
    """Random token ids with a full attention mask and random binary labels, from `seed`."""
    generator = torch.Generator().manual_seed(seed)
    return {
        "input_ids": torch.randint(0, vocab_size, (batch_size, seq_len), generator=generator),
        "attention_mask": torch.ones(batch_size, seq_len, dtype=torch.long),
        "labels": torch.randint(0, 2, (batch_size,), generator=generator),
    }


def count_parameters(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts, each shared tensor counted once."""
    params = list(model.parameters())  # `parameters` yields each tensor once
    trainable = sum(p.numel() for p in params if p.requires_grad)
    return trainable, sum(p.numel() for p in params)


def measure_training_steps(
    model: nn.Module,
    batch: dict[str, torch.Tensor],
    *,
    warmup: int,
    steps: int,
    lr: float = 1e-4,
) -> StepMeasurement:
    """Run `warmup` + `steps` AdamW steps (forward, backward, optimizer step); time each one.

    The model must return an output with a `loss` when given `labels`.
    """
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    page_in(model)
    gc.collect()
    _trim_malloc()
    baseline = _rss_bytes()
    method = "vmhwm" if _reset_peak_rss() else "ru_maxrss (not reset: includes loading)"
    times: list[float] = []
    cpu: list[float] = []
    foreign: list[float] = []
    faults: list[int] = []
    losses: list[float] = []
    for _ in range(warmup + steps):
        busy_start, cpu_start = system_busy_seconds(), time.process_time()
        faults_start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cpu_start)
        foreign.append(max(0.0, system_busy_seconds() - busy_start - cpu[-1]))
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_start)
        losses.append(float(loss.detach()))
    peak = _peak_rss_bytes()
    return StepMeasurement(
        step_seconds=times[warmup:],
        step_cpu_seconds=cpu[warmup:],
        step_foreign_cpu=foreign[warmup:],
        step_minor_faults=faults[warmup:],
        warmup_seconds=times[:warmup],
        loss_first=losses[0],
        loss_last=losses[-1],
        baseline_rss_bytes=baseline,
        peak_rss_bytes=peak,
        peak_delta_bytes=max(0, peak - baseline),
        memory_method=method,
    )


def system_busy_seconds() -> float:
    """CPU time the whole machine spent busy since boot (all cores, steal included), or 0.0.

    From /proc/stat, in clock ticks (10 ms): good enough to spot a step that shared the cores.
    """
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return 0.0
    # cpu user nice system idle iowait irq softirq steal guest guest_nice
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _status_kib(field: str) -> int | None:
    """A `kB` field of /proc/self/status, or None where there is no procfs."""
    try:
        with open("/proc/self/status") as status:
            match = re.search(rf"^{field}:\s+(\d+) kB", status.read(), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) if match else None


@torch.no_grad()
def page_in(model: nn.Module) -> None:
    """Read every weight once. Weights loaded from safetensors are mapped from the file and
    count in RSS only once read: without this, whichever framework reads them first (adaptlab
    hashes them when it adapts a model, others in the first training step) would have them in
    its baseline and the other in its peak."""
    for tensor in (*model.parameters(), *model.buffers()):
        tensor.sum()


def _rss_bytes() -> int:
    """Current resident set size."""
    kib = _status_kib("VmRSS")
    return kib * 1024 if kib is not None else _peak_rss_bytes()


def _peak_rss_bytes() -> int:
    """Resident set high-water mark since the last reset (or since the process started)."""
    kib = _status_kib("VmHWM")
    if kib is None:
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib * 1024


def _reset_peak_rss() -> bool:
    """Reset the kernel's RSS high-water mark to the current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


def _trim_malloc() -> None:
    """Give glibc's cached free memory back to the OS, so the baseline RSS is tight."""
    if os.name != "posix":
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)

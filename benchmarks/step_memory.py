"""Training memory as tensors, exactly: what autograd saves, and the peak of live tensor bytes.

Peak RSS (`methods_step.py`) is what a user sees, but it moves by several percent from one
process to the next with the allocator's state (freed blocks kept or handed back, fragments).
Two figures that do not depend on it, for the configurations of `methods_step.py` that have a
peer (adaptlab's LoRA, DoRA, (IA)3 and prefix tuning against PEFT's with the same trainable
tensors), beside full fine-tuning, on the benchmark's batch (16 x 128 random tokens, seed 0),
in train mode (dropout on):

- saved activations: every tensor autograd saves during one forward pass for the backward pass
  (`saved_tensors_hooks`), each storage once, the model's parameters left out;
- live peak: the highest total of tensor bytes allocated and not yet freed during one training
  step (zero_grad, forward, backward, AdamW; the step after a first one, so AdamW's state
  exists), from the allocations and frees torch's profiler records (`profile_memory`), above
  what was live when the step began.

Everything runs in this one process on 1 thread; neither figure depends on the machine's load.

Usage (from the repository root)::

    .venv/bin/python benchmarks/step_memory.py
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import methods_step
import torch
from report_file import heading, versions, write_json
from step_harness import configure_threads, make_batch
from step_worker import SETUPS, load_model
from torch import nn
from torch.profiler import ProfilerActivity, profile

OUT = Path(__file__).resolve().parent / "results" / "step_memory.json"
PAIRS = ("lora", "dora", "ia3", "prefix")


def saved_bytes(model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[int, int]:
    """(bytes, storages) autograd saves in one train-mode forward, parameters left out."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    model.train()
    torch.manual_seed(0)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = model(**batch).loss
    loss.backward()  # the graph is complete: every tensor was used
    return sum(storages.values()), len(storages)


def live_peak_bytes(model: nn.Module, batch: dict[str, torch.Tensor]) -> int:
    """The most tensor bytes live at once during one AdamW training step, above the start."""
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)

    def step() -> None:
        optimizer.zero_grad()
        model(**batch).loss.backward()
        optimizer.step()

    step()  # AdamW's state now exists, as in every later step
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        step()
    return events_peak(profiler)


def events_peak(profiler: profile) -> int:
    """The most tensor bytes live at once in the profiled span, above its start (the
    allocations and frees the profiler recorded, in time order)."""
    changes = sorted(
        (event.time_range.end, event.self_cpu_memory_usage)
        for event in profiler.events()
        if event.self_cpu_memory_usage
    )
    live = peak = 0
    for _, change in changes:
        live += change
        peak = max(peak, live)
    return peak


def measure(config: methods_step.Config, folder: Path, batch: dict[str, Any]) -> dict[str, Any]:
    """One configuration's saved activations and live peak."""
    model, _ = SETUPS[config.framework](load_model(str(folder)), config.method, config.options)
    total, count = saved_bytes(model, batch)
    return {
        "key": config.key,
        "label": config.label,
        "saved_mb": total / 1e6,
        "storages": count,
        "live_peak_mb": live_peak_bytes(model, batch) / 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    configure_threads(1)
    folder = methods_step.model_folder()
    ours = {c.label: c for c in methods_step.adaptlab_configs()}
    peers = {c.key.split(":")[1]: c for c in methods_step.PEFT_PEERS}
    batch = make_batch(30522, 16, 128, 0)
    rows = [measure(ours["full"], folder, batch)]
    for name in PAIRS:
        rows += [measure(ours[name], folder, batch), measure(peers[name], folder, batch)]
    by_key = {row["key"]: row for row in rows}
    lines = [
        f"{'configuration':16} {'saved MB':>9} {'storages':>9} {'live peak MB':>13} "
        f"{'saved / peft':>13} {'peak / peft':>12}"
    ]
    for row in rows:
        name = row["key"].split(":")[1]
        ratios = ["", ""]
        if row["key"].startswith("adaptlab:") and name in PAIRS:
            peer = by_key[f"peft:{name}"]
            ratios = [
                f"{row['saved_mb'] / peer['saved_mb']:.3f}",
                f"{row['live_peak_mb'] / peer['live_peak_mb']:.3f}",
            ]
        lines.append(
            f"{row['label']:16} {row['saved_mb']:9.1f} {row['storages']:9d} "
            f"{row['live_peak_mb']:13.1f} {ratios[0]:>13} {ratios[1]:>12}"
        )
    print("\n".join(lines))
    report = {
        **heading("step_memory"),
        "settings": {"batch_size": 16, "seq_len": 128, "seed": 0, "threads": 1},
        "environment": versions("torch", "transformers", "peft"),
        "rows": rows,
    }
    write_json(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

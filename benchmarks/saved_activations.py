"""What each method keeps for the backward pass: the bytes of activations autograd saves.

Peak RSS (`methods_step.py`) is what a user sees, but it moves by several percent from one
process to the next with the allocator's state. The activations a training step's forward pass
saves for its backward pass are exact and deterministic, and they are most of what a method
adds to training memory, so this script counts them for the configurations of
`methods_step.py` that have a peer (adaptlab's LoRA, DoRA, (IA)3 and prefix tuning against
PEFT's with the same trainable tensors), beside full fine-tuning.

Counted: every tensor autograd saves during one forward pass in train mode (dropout on) on the
benchmark's batch (16 x 128 random tokens, seed 0), through `saved_tensors_hooks`, each storage
once, leaving out the model's parameters. Everything runs in this one process on 1 thread; the
figures do not depend on the machine's load.

Usage (from the repository root)::

    .venv/bin/python benchmarks/saved_activations.py
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import sys
from pathlib import Path
from typing import Any

import methods_step
import torch
from step_harness import configure_threads, make_batch
from step_worker import SETUPS, load_model
from torch import nn

OUT = Path(__file__).resolve().parent / "results" / "saved_activations.json"
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


def measure(config: methods_step.Config, folder: Path, batch: dict[str, Any]) -> dict[str, Any]:
    """One configuration's saved activations."""
    model, _ = SETUPS[config.framework](load_model(str(folder)), config.method, config.options)
    total, count = saved_bytes(model, batch)
    return {"key": config.key, "label": config.label, "saved_mb": total / 1e6, "storages": count}


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
    lines = [f"{'configuration':16} {'saved MB':>9} {'storages':>9} {'adaptlab / peft':>16}"]
    for row in rows:
        name = row["key"].split(":")[1]
        ratio = ""
        if row["key"].startswith("adaptlab:") and name in PAIRS:
            ratio = f"{row['saved_mb'] / by_key[f'peft:{name}']['saved_mb']:.3f}"
        lines.append(f"{row['label']:16} {row['saved_mb']:9.1f} {row['storages']:9d} {ratio:>16}")
    print("\n".join(lines))
    report = {
        "benchmark": "saved_activations",
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": [Path(sys.executable).name, *sys.argv],
        "settings": {"batch_size": 16, "seq_len": 128, "seed": 0, "threads": 1},
        "environment": {
            name: importlib.metadata.version(name) for name in ("torch", "transformers", "peft")
        },
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The GPU half of `large_model_memory.py`: configurations (a)-(f) trained for real on a CUDA
GPU, each AdamW step's allocator peak (`torch.cuda.max_memory_allocated`, the second step, so
AdamW's state exists) and its median step time, side by side in one process. Run by
`make gpu-check`; without a GPU it says so and exits 0.

Usage (from the repository root)::

    .venv/bin/python benchmarks/large_model_memory_cuda.py [--tokens 512,2048,8192]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from large_model_setups import SETUPS, SHAPES, Setup, llama
from report_file import heading, versions, write_json
from tensor_bytes import LiveBytes

OUT = Path(__file__).resolve().parent / "results" / "large_model_memory_cuda.json"
GIB = 1 << 30


def measure(setup: Setup, shape: str, tokens: int, steps: int) -> dict[str, Any]:
    """Allocator peak of the second step and the median time of `steps` more (None when the
    step does not fit in the GPU's memory)."""
    setup.prepare()
    torch.cuda.empty_cache()
    torch.manual_seed(0)
    row: dict[str, Any] = {"setup": setup.key, "shape": shape, "tokens": tokens}
    try:
        with torch.device("cuda"):  # random weights made on the GPU, not copied there
            model = llama(shape, None, tokens)
        step = setup.build(model, LiveBytes())
        ids = torch.randint(0, model.config.vocab_size, (1, tokens), device="cuda")
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
        times = []
        for index in range(steps + 2):
            if index == 1:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            begin = time.perf_counter()
            optimizer.zero_grad()
            step(ids)
            optimizer.step()
            torch.cuda.synchronize()
            if index == 1:
                row["peak_bytes"] = torch.cuda.max_memory_allocated()
            if index >= 2:
                times.append(time.perf_counter() - begin)
        row["step_seconds"] = statistics.median(times)
    except torch.OutOfMemoryError:
        row.update(peak_bytes=None, step_seconds=None)
    finally:
        model = step = optimizer = None  # type: ignore[assignment]
        torch.cuda.empty_cache()
    return row


def main(argv: list[str] | None = None) -> int:
    """Measure every configuration, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="tinyllama-1.1b,smollm2-135m")
    parser.add_argument("--tokens", default="512,2048,8192")
    parser.add_argument("--setups", default="abcdef")
    parser.add_argument("--steps", type=int, default=3, help="timed steps after the measured one")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("large_model_memory_cuda: no CUDA GPU on this machine; nothing measured")
        return 0
    warnings.filterwarnings("ignore", category=FutureWarning)
    shapes, lengths = args.shapes.split(","), [int(t) for t in args.tokens.split(",")]
    setups = [s for s in SETUPS if s.key in args.setups]
    rows = []
    for shape in shapes:
        for tokens in lengths:
            for setup in setups:
                rows.append(measure(setup, shape, tokens, args.steps))
                shown = rows[-1]
                peak = "OOM" if shown["peak_bytes"] is None else f"{shown['peak_bytes'] / GIB:.3f}"
                print(f"{shape:16} ({setup.key}) {tokens:>6} tok  {peak:>8} GiB", flush=True)
    report = {
        **heading("large_model_memory_cuda"),
        "device": torch.cuda.get_device_name(0),
        "shape_configs": {s: SHAPES[s] for s in shapes},
        "setups": {s.key: s.label for s in setups},
        "environment": versions("torch", "transformers", "peft", "bitsandbytes"),
        "rows": rows,
    }
    write_json(report, args.out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

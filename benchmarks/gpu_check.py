"""`make gpu-check`: everything that needs a CUDA GPU, in one command of at most 8 minutes.

1. the CUDA tests (`tests/test_cuda.py`, `tests/test_cuda_training.py`): training with every
   method family in bf16, a composition, checkpointing with offloading, an NF4 base, saving on
   the GPU and loading on the CPU, a causal-LM sequence, a study run, and the analyses;
2. the GPU halves of the benchmarks, each writing `benchmarks/results/*_cuda.json`:
   `large_model_memory_cuda.py` (allocator peaks and step times of configurations (a)-(f)
   on the GPU, at 512 and 2,048 tokens to fit the budget).

Without a GPU it says so in one line and exits 0, so it is safe to run anywhere.

Usage (from the repository root)::

    make gpu-check
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
BUDGET_SECONDS = 8 * 60
STEPS = [
    ("CUDA tests", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "tests/test_cuda.py", "tests/test_cuda_training.py"]),
    ("large-model memory on the GPU", [sys.executable, "benchmarks/large_model_memory_cuda.py",
                                       "--tokens", "512,2048"]),
]  # fmt: skip


def main() -> int:
    """Run each step in order within the budget; exit non-zero when one fails."""
    if not torch.cuda.is_available():
        print("gpu-check: no CUDA GPU on this machine; nothing to check")
        return 0
    print(f"gpu-check on {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    started, failed = time.perf_counter(), []
    for title, command in STEPS:
        left = BUDGET_SECONDS - (time.perf_counter() - started)
        if left <= 0:
            print(f"gpu-check: out of time before {title}")
            failed.append(title)
            continue
        print(f"== {title}", flush=True)
        try:
            done = subprocess.run(command, cwd=ROOT, timeout=left, check=False)
        except subprocess.TimeoutExpired:
            print(f"gpu-check: {title} ran past the {BUDGET_SECONDS} s budget")
            failed.append(title)
            continue
        if done.returncode != 0:
            failed.append(title)
    took = time.perf_counter() - started
    print(f"gpu-check: {len(STEPS) - len(failed)} of {len(STEPS)} steps passed in {took:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

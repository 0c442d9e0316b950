"""RSA and linear CKA over every layer of MiniLM-L6 for 5,000 tokens: time, peak memory, and
adaptlab's CKA beside `ckatorch` (1.0.3) on the same features, in the same run. ckatorch runs
from benchmarks/.venv-cka, an overlay venv created on demand (benchmarks/overlay_venv.py).

Features: a trained run folder (default `runs/rt-full`: `adaptlab train --model minilm-l6
--data rotten-tomatoes --method full --train-size 1000 --epochs 10 --seed 0 --out runs/rt-full`)
is loaded as `adaptlab analyze` loads it; 5,000 tokens (seed 0) of its dev set go through the
base model (adaptation switched off) and the trained model; the 7 layers (embeddings + 6
blocks) of both are saved once. Then each measurement runs in its own fresh process that
loads those features, so peaks never mix:

- adaptlab RSA over all layers (chunked, paper-effectiveness §2.2);
- adaptlab linear CKA, plain and debiased, over all layers (d x d products);
- ckatorch `cka_base` (linear kernel, plain and unbiased: N x N Gram matrices) on the same
  features;
- adaptlab RSA on synthetic features of hidden size 1024 (N = 5000, one layer pair), the
  issue's memory bound (2 GB).

Time: wall time of the computation only (features already in memory). Peak memory: the
process's peak RSS during the computation minus its RSS just before (peak reset through
/proc/self/clear_refs). torch uses 2 threads. The table prints, the JSON goes to
benchmarks/results/analysis_similarity.json.

Usage (from the repository root)::

    .venv/bin/python benchmarks/analysis_similarity.py [--adapter runs/rt-full]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import safetensors.torch
import torch

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "analysis_similarity.json"
THREADS = 2
PEER_VENV = BENCH_DIR / ".venv-cka"
PEER_PACKAGES = ("ckatorch==1.0.3", "seaborn==0.13.2", "pandas==3.1.1")


def rss_kib(field: str) -> int:
    """VmRSS or VmHWM of this process, in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def worker(kind: str, features_path: str) -> dict[str, Any]:
    """Run one measurement on saved features; return values, seconds and peak MiB."""
    torch.set_num_threads(THREADS)
    tensors = {k: v.clone() for k, v in safetensors.torch.load_file(features_path).items()}
    layers = sorted({int(k.split(".")[1]) for k in tensors})
    pairs = [(tensors[f"base.{i}"], tensors[f"adapted.{i}"]) for i in layers]
    measures: dict[str, Any]
    if kind == "ckatorch":  # runs in the overlay venv, where adaptlab is not importable
        from ckatorch.core import cka_base

        measures = {
            "ckatorch cka": lambda x, y: float(cka_base(x, y)),
            "ckatorch cka unbiased": lambda x, y: float(cka_base(x, y, unbiased=True)),
        }
    elif kind == "adaptlab cka":
        from adaptlab.analysis import linear_cka

        measures = {
            "adaptlab cka": lambda x, y: linear_cka(x, y),
            "adaptlab cka debiased": lambda x, y: linear_cka(x, y, debiased=True),
        }
    else:
        from adaptlab.analysis import rsa

        measures = {"adaptlab rsa": lambda x, y: rsa(x, y)}
    results = {}
    for name, measure in measures.items():
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS to the current RSS
        before = rss_kib("VmRSS")
        began = time.perf_counter()
        values = [measure(x, y) for x, y in pairs]
        seconds = time.perf_counter() - began
        results[name] = {
            "values": values,
            "seconds": seconds,
            "peak_mib": (rss_kib("VmHWM") - before) / 1024,
        }
    return results


def in_process(kind: str, features_path: Path, python: str = sys.executable) -> dict[str, Any]:
    """`worker` in a fresh Python process (`python`: the peer's overlay venv for ckatorch)."""
    done = subprocess.run(
        [python, __file__, "--worker", kind, "--features", str(features_path)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def save_features(adapter: str, data: str, tokens: int, path: Path) -> dict[str, Any]:
    """Base and adapted features of every layer at `tokens` sampled dev tokens."""
    from adaptlab.analysis import base_and_adapted, load_target, sample_tokens

    torch.set_num_threads(THREADS)
    target = load_target(adapter, data)
    sample = sample_tokens(target.features, target.special_ids, tokens, seed=0)
    began = time.perf_counter()
    base, adapted = base_and_adapted(target.model, target.encoder, target.features, sample)
    seconds = time.perf_counter() - began
    saved = {f"base.{i}": t.contiguous() for i, t in enumerate(base)}
    saved |= {f"adapted.{i}": t.contiguous() for i, t in enumerate(adapted)}
    safetensors.torch.save_file(saved, str(path))
    return {
        "data": target.data,
        "hidden": base[0].shape[1],
        "layers": len(base),
        "feature_seconds": seconds,
    }


def synthetic_features(path: Path, tokens: int, hidden: int) -> None:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, hidden, generator=generator)
    y = x + 0.5 * torch.randn(tokens, hidden, generator=generator)
    safetensors.torch.save_file({"base.0": x, "adapted.0": y}, str(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", default="runs/rt-full")
    parser.add_argument("--data", default="rotten-tomatoes")
    parser.add_argument("--tokens", type=int, default=5000)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--features", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.features)))
        return
    if not Path(args.adapter).exists():
        sys.exit(f"{args.adapter}: no such run folder; train it first (see this script's doc)")
    with tempfile.TemporaryDirectory() as tmp:
        features = Path(tmp) / "features.safetensors"
        info = save_features(args.adapter, args.data, args.tokens, features)
        rows: dict[str, Any] = {}
        from overlay_venv import overlay_venv

        peer = str(overlay_venv(PEER_VENV, PEER_PACKAGES))
        for kind, python in (
            ("adaptlab rsa", sys.executable),
            ("adaptlab cka", sys.executable),
            ("ckatorch", peer),
        ):
            rows |= in_process(kind, features, python)
        wide = Path(tmp) / "wide.safetensors"
        synthetic_features(wide, args.tokens, 1024)
        rows["adaptlab rsa, hidden 1024 (1 layer)"] = in_process("adaptlab rsa", wide)[
            "adaptlab rsa"
        ]
    print(
        f"{args.tokens} tokens of {info['data']}, {info['layers']} layers of hidden "
        f"{info['hidden']} ({args.adapter} against its base); features in "
        f"{info['feature_seconds']:.1f} s"
    )
    print(f"{'measure':<36} {'seconds':>8} {'peak MiB':>9}  per-layer values")
    for name, row in rows.items():
        values = " ".join(f"{v:.4f}" for v in row["values"])
        print(f"{name:<36} {row['seconds']:8.2f} {row['peak_mib']:9.1f}  {values}")
    pairs = [("adaptlab cka", "ckatorch cka"), ("adaptlab cka debiased", "ckatorch cka unbiased")]
    differences = {
        f"{ours} - {theirs}": max(
            abs(a - b) for a, b in zip(rows[ours]["values"], rows[theirs]["values"], strict=True)
        )
        for ours, theirs in pairs
    }
    for name, gap in differences.items():
        print(f"max |{name}| over layers: {gap:.2e}")
    result = {
        "adapter": args.adapter,
        "tokens": args.tokens,
        **info,
        "measures": rows,
        "max_abs_difference": differences,
        "environment": {
            "torch": torch.__version__,
            "ckatorch": PEER_PACKAGES[0].split("==")[1],
            "python": platform.python_version(),
            "machine": platform.machine(),
            "torch_threads": THREADS,
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

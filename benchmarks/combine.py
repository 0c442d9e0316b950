"""Combining three LoRA adapters of TinyLlama-1.1B's shape: adaptlab's `combine_lora` over
every layer beside PEFT's `add_weighted_adapter` on the same adapters, in one process.

The model is a random-weight LlamaForCausalLM built from a config of TinyLlama-1.1B's shape
(hidden 2048, intermediate 5632, 32 heads, 4 key-value heads, vocabulary 32000; nothing is
downloaded) with `--layers` of its 22 blocks (default 1: an _svd how takes 10 to 30 s per
block and library on 2 idle cores, most of it in the SVDs of the 7 merged updates). Every
block has the same shapes, so the full model's time is about 22 / layers times the one
measured; the memory peaks are those of one layer's work plus the results. Three PEFT LoRA
adapters of rank 16 (alphas 16, 32, 8) sit on q/k/v/o/gate/up/down, with random A and B
(seed 0). Rows: every how (`--hows` picks some), beside PEFT's combination_type that gives
its pairs (`Combination.peft_type`: linear is PEFT's cat, peft_linear PEFT's linear), weights
(0.5, 0.3, -0.2), density 0.5 where the rule prunes, rank 16 for the _svd hows; the dare hows
draw their masks from seed 0 on both sides (torch's global generator is seeded with it just
before PEFT's merge loop, as `combine_math` documents), so their pairs compare too.

For each row the two libraries run `--repeats` times each (default 2), in turns (PEFT then
adaptlab, adaptlab then PEFT, ...), on 2 threads; the lowest of each figure is kept, the
others are in the JSON:

- seconds: wall time of the whole call (PEFT's includes adding the new adapter's modules to
  the model, adaptlab's is the arithmetic over the same layers, results kept), and the CPU
  seconds of this process during it (less moved by other work on a shared machine);
- tensor peak: the most bytes of tensors created during the call and alive at once
  (`tensor_bytes.LiveBytes`), results included;
- RSS peak: the process's peak resident set during the call (VmHWM, reset just before through
  /proc/self/clear_refs) minus its resident set just before (no ratio below 1 MB, where the
  figure is the allocator's noise).

The combined pairs of the two are compared (largest difference of A, B and B A over all
layers). The table prints, the JSON goes to benchmarks/results/combine.json.

Usage (from the repository root; about 10 minutes on 2 cores at load 1-2 with `--repeats 3`)::

    OMP_WAIT_POLICY=PASSIVE flock /tmp/adaptlab-bench.lock .venv/bin/python benchmarks/combine.py

with `--layers N` (default 1), `--repeats N` (default 2) and `--hows ties_svd,svd` (default:
all). OMP_WAIT_POLICY=PASSIVE: idle OpenMP threads sleep rather than spin, so a busy neighbour
core does not stall the SVDs; the lock keeps other benchmarks that take it from running
alongside. The JSON records the wait policy, the command of the process that started this one
(flock's, run so) and the load average around each row.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from analysis_similarity import rss_kib
from report_file import heading, versions, write_json
from tensor_bytes import LiveBytes

from adaptlab.methods.combination import Combination
from adaptlab.methods.combine_math import combine_lora, result_rank

OUT = Path(__file__).resolve().parent / "results" / "combine.json"
THREADS = 2
SHAPE = {
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
}
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
SOURCES = ("first", "second", "third")
RANK = 16
ALPHAS = (16, 32, 8)
WEIGHTS = (0.5, 0.3, -0.2)
DENSITY = 0.5
ROWS = (
    Combination("linear", WEIGHTS),
    Combination("peft_linear", WEIGHTS),
    Combination("cat", WEIGHTS),
    Combination("svd", WEIGHTS, rank=RANK),
    Combination("ties", WEIGHTS, density=DENSITY),
    Combination("ties_svd", WEIGHTS, density=DENSITY, rank=RANK),
    Combination("dare_linear", WEIGHTS, density=DENSITY),
    Combination("dare_ties", WEIGHTS, density=DENSITY),
    Combination("dare_linear_svd", WEIGHTS, density=DENSITY, rank=RANK),
    Combination("dare_ties_svd", WEIGHTS, density=DENSITY, rank=RANK),
    Combination("magnitude_prune", WEIGHTS, density=DENSITY),
    Combination("magnitude_prune_svd", WEIGHTS, density=DENSITY, rank=RANK),
)
RATIO_FLOORS = {"seconds": 0.01, "cpu_seconds": 0.01, "tensor_peak_mb": 1.0, "rss_peak_mb": 1.0}
"""The least figure of PEFT's a ratio is taken over (below 1 MB a peak is the allocator's noise)."""
Pairs = list[tuple[torch.Tensor, torch.Tensor, float]]


def build(layers: int) -> Any:
    """The random model of TinyLlama's shape with the three adapters (random A and B)."""
    import peft
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(**SHAPE, num_hidden_layers=layers)
    model = transformers.LlamaForCausalLM(config).eval()
    wrapped = None
    for name, alpha in zip(SOURCES, ALPHAS, strict=True):
        lora = peft.LoraConfig(r=RANK, lora_alpha=alpha, target_modules=TARGETS)
        if wrapped is None:
            wrapped = peft.get_peft_model(model, lora, adapter_name=name)
        else:
            wrapped.add_adapter(name, lora)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _, layer in lora_layers(wrapped):
            for name in SOURCES:
                for side in (layer.lora_A[name].weight, layer.lora_B[name].weight):
                    side.copy_(torch.randn(side.shape, generator=generator) / side.shape[1] ** 0.5)
    return wrapped


def lora_layers(model: Any) -> Iterator[tuple[str, Any]]:
    """PEFT's LoRA layers in the model's module order."""
    from peft.tuners.lora import LoraLayer

    for name, module in model.named_modules():
        if isinstance(module, LoraLayer):
            yield name, module


def source_pairs(model: Any) -> dict[str, Pairs]:
    """Each layer's (A, B, scaling) of the three sources, as adaptlab takes them."""
    return {
        name: [
            (layer.lora_A[s].weight.detach(), layer.lora_B[s].weight.detach(), layer.scaling[s])
            for s in SOURCES
        ]
        for name, layer in lora_layers(model)
    }


def ours(
    pairs: dict[str, Pairs], combination: Combination
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """adaptlab's combined pair of every layer."""
    generator = torch.Generator().manual_seed(combination.seed) if combination.random else None
    return {name: combine_lora(layer, combination, generator) for name, layer in pairs.items()}


def theirs(model: Any, combination: Combination) -> None:
    """PEFT's combined adapter, named after the how. For a dare how torch's global generator
    is seeded with the combination's seed right after PEFT has added the new adapter's modules
    (which draw their initial weights), before its merge loop draws the masks."""
    lora = model.base_model
    inject = lora.inject_adapter

    def inject_then_seed(*args: Any, **kwargs: Any) -> None:
        inject(*args, **kwargs)
        torch.manual_seed(combination.seed)

    if combination.random:
        lora.inject_adapter = inject_then_seed
    try:
        model.add_weighted_adapter(
            list(SOURCES),
            list(combination.weights),
            combination.how,
            combination_type=combination.peft_type,
            svd_rank=combination.rank,
            density=combination.density,
            majority_sign_method=combination.majority_sign,
        )
    finally:
        lora.__dict__.pop("inject_adapter", None)


def measure(call: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    """`call`'s result, its wall and CPU seconds, tensor peak and RSS peak (MB)."""
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS to the current RSS
    before = rss_kib("VmRSS")
    with torch.no_grad(), LiveBytes() as counter:
        began, cpu_began = time.perf_counter(), time.process_time()
        result = call()
        seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu_began
    return result, {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "tensor_peak_mb": counter.peak / 1e6,
        "rss_peak_mb": (rss_kib("VmHWM") - before) * 1024 / 1e6,
    }


def differences(
    model: Any, combined: dict[str, tuple[torch.Tensor, torch.Tensor]], how: str
) -> dict[str, float]:
    """The largest difference between PEFT's pairs and adaptlab's over all layers."""
    worst = {"a": 0.0, "b": 0.0, "delta": 0.0}
    with torch.no_grad():
        for name, layer in lora_layers(model):
            a, b = combined[name]
            their_a, their_b = layer.lora_A[how].weight, layer.lora_B[how].weight
            found = {
                "a": (a - their_a).abs().max().item(),
                "b": (b - their_b).abs().max().item(),
                "delta": (b @ a - their_b @ their_a).abs().max().item(),
            }
            worst = {key: max(worst[key], found[key]) for key in worst}
    return worst


def row(
    model: Any, pairs: dict[str, Pairs], combination: Combination, repeats: int
) -> dict[str, Any]:
    """One how, each library `repeats` times in turns (PEFT first, then adaptlab first, ...),
    the lowest of each figure kept; then how far apart their pairs are."""
    runs: dict[str, list[dict[str, float]]] = {"peft": [], "adaptlab": []}
    load_before = os.getloadavg()
    combined: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for repeat in range(repeats):
        for library in ("peft", "adaptlab")[:: 1 if repeat % 2 == 0 else -1]:
            if library == "peft":
                if combination.how in model.peft_config:
                    model.delete_adapter(combination.how)
                _, figures = measure(lambda: theirs(model, combination))
            else:
                combined = {}  # the last results go before the next are measured
                combined, figures = measure(lambda: ours(pairs, combination))
            runs[library].append(figures)
    found = differences(model, combined, combination.how)
    model.delete_adapter(combination.how)
    lowest = {
        library: {key: min(figures[key] for figures in done) for key in done[0]}
        for library, done in runs.items()
    }
    ours_lowest, peft_lowest = lowest["adaptlab"], lowest["peft"]
    return {
        "how": combination.how,
        "combination": combination.to_dict(),
        "rank": result_rank([RANK] * len(SOURCES), combination),
        "adaptlab": ours_lowest,
        "peft": peft_lowest,
        "ratio": {
            key: ours_lowest[key] / peft_lowest[key]
            if peft_lowest[key] >= RATIO_FLOORS[key]
            else None
            for key in ours_lowest
        },
        "max_abs_difference": found,
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "runs": runs,
    }


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a plain-text table."""
    lines = [
        f"{'how':19} {'library':9} {'seconds':>9} {'CPU s':>8} {'tensor MB':>10} {'RSS MB':>9} "
        f"{'time / peft':>12} {'tensor / peft':>14} {'RSS / peft':>11} {'max |d|':>10}"
    ]
    for item in rows:
        for library in ("peft", "adaptlab"):
            figures = item[library]
            ratios = ["", "", "", ""]
            if library == "adaptlab":
                ratio = item["ratio"]
                ratios = [
                    *(
                        "-" if ratio[key] is None else f"{ratio[key]:.2f}"
                        for key in ("seconds", "tensor_peak_mb", "rss_peak_mb")
                    ),
                    f"{max(item['max_abs_difference'].values()):.1e}",
                ]
            lines.append(
                f"{item['how']:19} {library:9} {figures['seconds']:9.2f} "
                f"{figures['cpu_seconds']:8.2f} "
                f"{figures['tensor_peak_mb']:10.1f} {figures['rss_peak_mb']:9.1f} "
                f"{ratios[0]:>12} {ratios[1]:>14} {ratios[2]:>11} {ratios[3]:>10}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Build, measure every row, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=1, help="blocks of the model (of 22)")
    parser.add_argument("--repeats", type=int, default=2, help="calls of each library per how")
    parser.add_argument(
        "--hows",
        type=lambda text: text.split(","),
        default=[combination.how for combination in ROWS],
        help="the hows to measure, comma-separated (default: all)",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(THREADS)
    began = time.perf_counter()
    model = build(args.layers)
    build_seconds = time.perf_counter() - began
    pairs = source_pairs(model)
    chosen = [combination for combination in ROWS if combination.how in args.hows]
    if len(chosen) != len(set(args.hows)):
        parser.error(f"--hows: choose among {', '.join(c.how for c in ROWS)}")
    rows = [row(model, pairs, combination, args.repeats) for combination in chosen]
    print(table(rows))
    report = {
        **heading("combine"),
        "started_by": Path(f"/proc/{os.getppid()}/cmdline").read_text().rstrip("\0").split("\0"),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
        "settings": {
            "shape": SHAPE,
            "layers": args.layers,
            "targets": TARGETS,
            "lora_layers": len(pairs),
            "source_rank": RANK,
            "source_alphas": list(ALPHAS),
            "weights": list(WEIGHTS),
            "threads": THREADS,
            "repeats": args.repeats,
            "order": "per row, in turns: peft then adaptlab, adaptlab then peft, ...; "
            "one process; the lowest of each figure kept",
        },
        "build_seconds": build_seconds,
        "environment": versions("torch", "transformers", "peft"),
        "rows": rows,
    }
    write_json(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

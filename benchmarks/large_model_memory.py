"""LoRA training memory on real model sizes: the peak of live tensor bytes in one AdamW step.

The figure: the most tensor bytes live at once during one training step (zero_grad, forward,
loss, backward, AdamW step; the second step, so AdamW's state exists), counting every live
tensor, the model's weights included (an NF4 base is smaller: that is part of it). Random
weights in two Llama shapes (`large_model_setups.SHAPES`): TinyLlama-1.1B's and
SmolLM2-135M's; batch 1, random token ids, no padding (so no attention mask), causal-LM loss;
LoRA r = 16, alpha 32 on q, k, v, o, gate, up, down of every layer, trained in float32, in six
setups (`large_model_setups.SETUPS`):
(a) PEFT, fp32; (b) PEFT, bf16 base, bf16 autocast, transformers' checkpointing;
(c) PEFT QLoRA (NF4 + double quant, bf16 compute, `prepare_model_for_kbit_training`,
checkpointing, bf16 autocast as `Trainer(bf16=True)` adds); (d) adaptlab, bf16 base + autocast
+ checkpointing + chunked loss; (e) as (d) on an NF4 base (`quantize_base`); (f) (e) with
offloaded activations. Checkpointing is non-reentrant everywhere.

How it is counted (`tensor_bytes.LiveBytes`): a dispatch mode adds each new storage's bytes and
takes them off when it is freed. A real step at 1.1B and thousands of tokens takes far too long
on 2 CPU cores, so every row of the table is counted on fake tensors (`fake_step`: shapes,
dtypes and storages without data, the same code run; bitsandbytes registers fake versions of its
ops, and what else a fake step needs is listed there). The check lines show, for every setup,
that the fake count (peak, and what was live as the step began) equals the real one, counted in
the same run on the SmolLM2 shape at 512 tokens.

Offloading, (f): fake CUDA tensors cannot be made on a machine without CUDA (random init
raises "PyTorch is not linked with support for cuda devices"), so every setup runs on the CPU and
(f) uses adaptlab's offload context for a GPU, `offloaded_activations(torch.device("cuda"))`:
every storage its pack hook makes (the host copy) is counted as host memory, and each unpack hands
the backward pass a new accelerator-side copy, as `.to("cuda")` of a host tensor does. (f)'s
figure is the accelerator side only; the host peak is in the JSON.

Also measured, on real tensors: the step time of (d) over (b) on the SmolLM2 shape at 512
tokens, both models in this process, steps interleaved, median of each (a ratio only: the
machine is shared). Goals (reported PASS/FAIL, never asserted): at 2,048 tokens on the 1.1B
shape (e) <= 0.4 x (b), (e) <= 0.8 x (c), (f) <= 0.3 x (b); the longest length (512 to 32,768,
doubling) whose step fits in 4 GiB is at least 4x longer for (e) or (f) than for (c).

Usage (from the repository root; about 20 minutes on 2 cores)::

    .venv/bin/python benchmarks/large_model_memory.py
    .venv/bin/python benchmarks/large_model_memory.py --setups abc --no-time   # PEFT only
    .venv/bin/python benchmarks/large_model_memory.py --shapes tiny --tokens 64 \
        --fit-shape '' --check-shape tiny --no-time                          # a quick look
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from fake_step import fake_step
from large_model_setups import REAL_SHAPES, SETUPS, SHAPES, Setup, llama
from report_file import heading, versions, write_report
from tensor_bytes import LiveBytes

OUT = Path(__file__).resolve().parent / "results" / "large_model_memory.json"
GIB = 1024**3
FIT_FROM, FIT_TO = 512, 32768


def measure(
    setup: Setup, shape: str, tokens: int, *, fake: bool, layers: int | None = None
) -> dict[str, Any]:
    """Live-byte peak of the second AdamW step of `setup` (and what was live as it began)."""
    setup.prepare()
    mode = fake_step() if fake else contextlib.nullcontext()
    started = time.monotonic()
    with mode, LiveBytes() as counter:
        torch.manual_seed(0)
        model = llama(shape, layers, max(tokens, FIT_TO))
        step = setup.build(model, counter)
        ids = torch.randint(0, model.config.vocab_size, (1, tokens))
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=1e-4)
        start = 0
        for index in range(2):
            if index == 1:
                counter.reset_peak()
                start = counter.live
            optimizer.zero_grad()
            step(ids)
            optimizer.step()
        row = {
            "setup": setup.key,
            "shape": shape,
            "layers": layers or SHAPES[shape]["num_hidden_layers"],
            "tokens": tokens,
            "fake": fake,
            "peak_bytes": counter.peak,
            "peak_op": counter.peak_op,
            "start_bytes": start,
            "host_peak_bytes": counter.host_peak,
            "trainable": sum(p.numel() for p in trainable),
            "seconds": 0.0,
        }
        del model, step, optimizer, trainable
    row["seconds"] = time.monotonic() - started
    return row


def real_fake_check(setup: Setup, shape: str, tokens: int) -> dict[str, Any]:
    """`setup`'s step counted on real and on fake tensors at a small `shape`: the two peaks,
    and whether they and what was live as each step began are equal."""
    real, faked = (measure(setup, shape, tokens, fake=fake) for fake in (False, True))
    return {
        "setup": setup.key,
        "real_bytes": real["peak_bytes"],
        "fake_bytes": faked["peak_bytes"],
        "equal": real["peak_bytes"] == faked["peak_bytes"]
        and real["start_bytes"] == faked["start_bytes"],
    }


def fake_peaks(
    setups: list[Setup], shape: str, tokens: int, check_shape: str, check_tokens: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each setup's row on fake tensors at `shape` and `tokens`, and its `real_fake_check` at
    `check_shape` and `check_tokens`: the rows and the checks."""
    rows, checks = [], []
    for setup in setups:
        row = measure(setup, shape, tokens, fake=True)
        rows.append(row)
        print(f"  {setup.label}: {row['peak_bytes'] / GIB:.3f} GiB ({row['seconds']:.0f} s)")
        checks.append(real_fake_check(setup, check_shape, check_tokens))
        gc.collect()
    return rows, checks


def check_lines(checks: list[dict[str, Any]], where: str) -> list[str]:
    """A report line for each `real_fake_check` in `checks`, all made `where`."""
    return [
        f"  check {check['setup']} on {where}: real {check['real_bytes']:,} B, "
        f"fake {check['fake_bytes']:,} B: {'EQUAL' if check['equal'] else 'DIFFER'}"
        for check in checks
    ]


def step_seconds(setups: list[Setup], shape: str, tokens: int, steps: int) -> dict[str, float]:
    """Median real step time of each setup, steps interleaved after one warm-up step each."""
    runs = []
    for setup in setups:
        setup.prepare()
        torch.manual_seed(0)
        model = llama(shape, None, tokens)
        step = setup.build(model, LiveBytes())
        ids = torch.randint(0, model.config.vocab_size, (1, tokens))
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
        runs.append((setup.key, step, optimizer, ids))
    times: dict[str, list[float]] = {key: [] for key, *_ in runs}
    for index in range(steps + 1):
        for key, step, optimizer, ids in runs:
            begin = time.perf_counter()
            optimizer.zero_grad()
            step(ids)
            optimizer.step()
            if index:  # the first is the warm-up
                times[key].append(time.perf_counter() - begin)
    return {key: statistics.median(values) for key, values in times.items()}


class Rows:
    """Fake-tensor measurements, each made once, in the order made."""

    def __init__(self, layers: int | None) -> None:
        self.layers = layers
        self.rows: dict[tuple[str, str, int], dict[str, Any]] = {}

    def get(self, setup: Setup, shape: str, tokens: int) -> dict[str, Any]:
        """The row of `setup` on `shape` at `tokens`, measured on first use."""
        key = (setup.key, shape, tokens)
        if key not in self.rows:
            self.rows[key] = measure(setup, shape, tokens, fake=True, layers=self.layers)
            row = self.rows[key]
            print(
                f"  ({setup.key}) {shape} @{tokens}: {row['peak_bytes'] / GIB:.3f} GiB "
                f"({row['seconds']:.0f} s)",
                flush=True,
            )
        return self.rows[key]

    def peak(self, key: str, shape: str, tokens: int) -> int | None:
        """A measured peak, None when that row was not measured."""
        row = self.rows.get((key, shape, tokens))
        return None if row is None else int(row["peak_bytes"])


def fit_length(rows: Rows, setup: Setup, shape: str, limit: float, lengths: list[int]) -> int:
    """The longest of `lengths` (ascending) whose step peak stays within `limit` bytes (0: none);
    peaks grow with length, so the search stops at the first that does not fit."""
    best = 0
    for tokens in lengths:
        if rows.get(setup, shape, tokens)["peak_bytes"] > limit:
            break
        best = tokens
    return best


def make_goals(rows: Rows, fits: dict[str, int], shape: str) -> list[dict[str, Any]]:
    """The four goals, each with its measured value (None where a figure is missing)."""

    def quotient(a: str, b: str) -> float | None:
        top, bottom = rows.peak(a, shape, 2048), rows.peak(b, shape, 2048)
        return None if top is None or not bottom else top / bottom

    longest = max(fits.get("e", 0), fits.get("f", 0))
    fit_ratio = longest / fits["c"] if fits.get("c") else None  # (c) fitting none: unknown
    goals = [
        (f"(e) / (b) at 2048 tokens, {shape}", quotient("e", "b"), "<=", 0.4),
        (f"(e) / (c) at 2048 tokens, {shape}", quotient("e", "c"), "<=", 0.8),
        (f"(f) / (b) at 2048 tokens, {shape}", quotient("f", "b"), "<=", 0.3),
        ("longest fitting length, max((e), (f)) / (c)", fit_ratio, ">=", 4.0),
    ]
    return [
        {
            "goal": name,
            "value": value,
            "op": op,
            "limit": limit,
            "pass": value is not None and (value <= limit if op == "<=" else value >= limit),
        }
        for name, value, op, limit in goals
    ]


def format_report(report: dict[str, Any], setups: list[Setup], rows: Rows) -> str:
    """The table, the check lines, the fit lengths, the step-time ratio and the goals."""
    settings = report["settings"]
    head = f"{'shape':16} {'setup':32}" + "".join(f"{f'{t} tok':>10}" for t in settings["tokens"])
    lines = [
        "peak live tensor GiB in one AdamW step (weights, gradients, AdamW state, activations), "
        "every row counted on fake tensors; [accel]: accelerator side only",
        head,
        "-" * len(head),
    ]
    for shape in settings["shapes"]:
        for setup in setups:
            cells = [rows.peak(setup.key, shape, t) for t in settings["tokens"]]
            text = "".join(f"{c / GIB:10.3f}" if c is not None else f"{'-':>10}" for c in cells)
            label = f"({setup.key}) {setup.label}" + (" [accel]" if setup.offloads else "")
            lines.append(f"{shape:16} {label:32}{text}")
    lines.append("\nfake count = real count, both counted in this run:")
    for check in report["checks"]:
        lines.append(
            f"  ({check['setup']}) {check['shape']} x{check['layers']} layers @{check['tokens']}: "
            f"real {check['real_bytes']:,} B, fake {check['fake_bytes']:,} B: "
            f"{'EQUAL' if check['equal'] else 'DIFFER'}"
        )
    if report["fits"]:
        lines.append(
            f"\nlongest length whose step fits in {settings['fit_gib']} GiB of tensors "
            f"({settings['fit_shape']}; {settings['fit_lengths'][0]} to "
            f"{settings['fit_lengths'][-1]}, doubling):"
        )
        lines += [f"  ({key}) {length or 'none'}" for key, length in report["fits"].items()]
    timing = report["step_time"]
    if timing:
        lines.append(f"\nstep time (d) / (b), real, {timing['where']}: {timing['ratio']:.2f}")
    lines.append("\ngoals (measured, not asserted):")
    for g in report["goals"]:
        value = "n/a" if g["value"] is None else f"{g['value']:.3f}"
        verdict = "PASS" if g["pass"] else "FAIL"
        lines.append(f"  {verdict}  {g['goal']}: {value} (goal {g['op']} {g['limit']})")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(REAL_SHAPES), help="comma-separated shapes")
    parser.add_argument("--tokens", default="512,2048,8192", help="comma-separated lengths")
    parser.add_argument("--setups", default="abcdef", help="setup letters (default abcdef)")
    parser.add_argument("--layers", type=int, help="fewer layers than the shape has (quick looks)")
    parser.add_argument("--fit-shape", default="tinyllama-1.1b", help="'' skips the fit search")
    parser.add_argument("--fit-gib", type=float, default=4.0)
    parser.add_argument("--fit-from", type=int, default=FIT_FROM, help="shortest length tried")
    parser.add_argument("--fit-to", type=int, default=FIT_TO, help="longest length tried")
    parser.add_argument("--check-shape", default="smollm2-135m")
    parser.add_argument("--check-tokens", type=int, default=512)
    parser.add_argument("--check-layers", type=int, help="fewer layers for the real/fake check")
    parser.add_argument("--time-steps", type=int, default=3, help="timed steps of (b) and (d)")
    parser.add_argument("--no-time", dest="time", action="store_false", help="skip step times")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.shapes = [s for s in args.shapes.split(",") if s]
    args.tokens = [int(t) for t in args.tokens.split(",") if t]
    args.fit_lengths = [
        args.fit_from * 2**i for i in range(64) if args.fit_from * 2**i <= args.fit_to
    ]
    unknown = [s for s in [*args.shapes, args.check_shape, args.fit_shape] if s and s not in SHAPES]
    if unknown:
        parser.error(f"unknown shape {unknown[0]!r}; shapes: {', '.join(SHAPES)}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Measure, print the report, write the JSON."""
    args = parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)  # transformers' renamed methods
    started = time.monotonic()
    setups = [s for s in SETUPS if s.key in args.setups]
    rows = Rows(args.layers)
    print("table (fake tensors):", flush=True)
    for shape in args.shapes:
        for tokens in args.tokens:
            for setup in setups:
                rows.get(setup, shape, tokens)
    fits: dict[str, int] = {}
    if args.fit_shape:
        print(f"fit search on {args.fit_shape} (fake tensors):", flush=True)
        limit = args.fit_gib * GIB
        fits = {s.key: fit_length(rows, s, args.fit_shape, limit, args.fit_lengths) for s in setups}
    print("real / fake checks:", flush=True)
    checks = []
    for setup in setups:
        pair = [
            measure(setup, args.check_shape, args.check_tokens, fake=fake, layers=args.check_layers)
            for fake in (False, True)
        ]
        real, fake = pair[0]["peak_bytes"], pair[1]["peak_bytes"]
        starts = [row["start_bytes"] for row in pair]
        checks.append(
            {
                "setup": setup.key,
                "shape": args.check_shape,
                "layers": pair[0]["layers"],
                "tokens": args.check_tokens,
                "real_bytes": real,
                "fake_bytes": fake,
                "real_start_bytes": starts[0],
                "fake_start_bytes": starts[1],
                "equal": real == fake and starts[0] == starts[1],
                "real_seconds": pair[0]["seconds"],
            }
        )
        print(f"  ({setup.key}) real {real:,} fake {fake:,}", flush=True)
    step_time: dict[str, Any] = {}
    timed = [s for s in setups if s.key in ("b", "d")]
    if args.time and len(timed) == 2:
        where = f"{args.check_shape} @{args.check_tokens} tokens, median of {args.time_steps}"
        seconds = step_seconds(timed, args.check_shape, args.check_tokens, args.time_steps)
        step_time = {"where": where, "seconds": seconds, "ratio": seconds["d"] / seconds["b"]}
    report = {
        **heading("large_model_memory"),
        "settings": {
            "shapes": args.shapes,
            "shape_configs": {s: SHAPES[s] for s in args.shapes},
            "layers": args.layers,
            "tokens": args.tokens,
            "batch_size": 1,
            "lora": {"rank": 16, "alpha": 32, "dropout": 0.0, "layers": "q,k,v,o,gate,up,down"},
            "optimizer": "AdamW lr 1e-4, the second step measured",
            "fit_shape": args.fit_shape,
            "fit_gib": args.fit_gib,
            "fit_lengths": args.fit_lengths,
            "threads": torch.get_num_threads(),
        },
        "environment": versions("torch", "transformers", "peft", "bitsandbytes"),
        "setups": {s.key: s.label for s in setups},
        "rows": list(rows.rows.values()),
        "checks": checks,
        "fits": fits,
        "step_time": step_time,
        "goals": make_goals(rows, fits, args.fit_shape or args.shapes[0]),
        "wall_seconds": time.monotonic() - started,
    }
    write_report(report, format_report(report, setups, rows), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

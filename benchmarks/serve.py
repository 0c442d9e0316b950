"""`adaptlab serve` under load: throughput and latency with one adapter and with five mixed,
its memory against one-adapter processes, and mixed-adapter batches against PEFT's.

Everything on all-MiniLM-L6-v2 (`minilm-l6`) with five LoRA adapters (rank 8, query and
value, each with its own pooler + classifier) trained by the command line on Rotten Tomatoes
(`--train-size 200 --epochs 1`, seeds 0-4; made once, reused from `--adapters`):

1. **HTTP.** The real server (`adaptlab serve`, a separate process) is driven by 1, 8 and 32
   concurrent httpx clients, each sending one Rotten Tomatoes test review per request, back
   to back, for `--seconds` per cell: all requests to one adapter, or each request to one of
   the five at random (uniform). Cells alternate single / mixed and repeat `--rounds` times;
   throughput is the median over rounds, p50 / p99 latency over every request of a cell.
2. **Memory.** The server's resident set size (RSS and USS) with all five adapters loaded,
   after a fixed warm-up (the same 320 requests, 32 at a time, on the same texts), against a
   second server given a registry of one adapter and the same warm-up: "5 separate
   processes" is five times that one. The five-adapter server's memory after all the timed
   runs is recorded too (longer traffic leaves the allocator holding more: larger padded
   batches were seen, whatever the adapters).
3. **Against PEFT** (`peft==0.21.2`), in this process: the same batches of 32 reviews, each
   review routed to one of the five adapters at random. adaptlab runs each adapter's rows as
   one contiguous slice (what the server does: `set_active`, then a forward); PEFT runs the
   whole batch at once with `adapter_names` per example. The adapters are exported with
   `adaptlab export --format peft`; PEFT's mixed batches take only Linear / Embedding / Conv
   modules as `modules_to_save`, so the exported pooler is saved as `bert.pooler.dense` (the
   same function: the pooler is that Linear and a tanh). Inputs are tokenized before timing;
   logits are checked to agree.

Usage (from the repository root; about 15 minutes on 2 busy cores, most of it training)::

    .venv/bin/python benchmarks/serve.py
    .venv/bin/python benchmarks/serve.py --seconds 5 --rounds 1     # quicker, noisier
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil
import torch
from report_file import machine, write_json

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "serve.json"
DEFAULT_ADAPTERS = BENCH_DIR.parent / "runs" / "serve-bench"
MODEL = "minilm-l6"
DATA = "rotten-tomatoes"
ADAPTERS = tuple(f"rt-lora-{seed}" for seed in range(5))
CONCURRENCY = (1, 8, 32)
CLI = [sys.executable, "-c", "from adaptlab.cli.app import main; main()"]
TARGETS = {"mixed_over_single": 0.8, "memory_over_one": 1.1, "adaptlab_over_peft": 1.0}

Drive = Callable[
    [str, tuple[str, ...], list[str], int, float, int], Coroutine[Any, Any, dict[str, Any]]
]
"""Clients driving a server (url, adapters, texts, clients, seconds, seed) and what they did."""


@dataclass(frozen=True)
class Rate:
    """What a cell's rate counts: `counted` (a key of a drive's result) per second, reported as
    `key` and printed in `unit`."""

    key: str
    counted: str
    unit: str


REQUESTS = Rate("throughput_rps", "requests", "req/s")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--adapters", type=Path, default=DEFAULT_ADAPTERS)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seconds", type=float, default=10.0, help="per cell and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument("--max-wait-ms", type=float, default=5.0)
    parser.add_argument("--peft-batches", type=int, default=20)
    return parser.parse_args()


def train_adapters(folder: Path, threads: int) -> None:
    """The five LoRA adapters, trained by the command line unless already there."""
    folder.mkdir(parents=True, exist_ok=True)
    for seed, name in enumerate(ADAPTERS):
        if (folder / name / "adapter" / "manifest.json").is_file():
            continue
        print(f"training {name} ...", flush=True)
        subprocess.run(
            [*CLI, "train", "--model", MODEL, "--data", DATA, "--method", "lora"]
            + ["--train-size", "200", "--epochs", "1", "--seed", str(seed)]
            + ["--out", str(folder / name), "--no-progress", "--overwrite"],
            check=True,
            env=_env(threads),
        )


def _env(threads: int) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def server(
    registry: Path, threads: int, max_wait_ms: float, model: str = MODEL
) -> Iterator[tuple[str, int]]:
    """`adaptlab serve` on `registry` in its own process; yields (base URL, pid)."""
    port = _free_port()
    command = [*CLI, "serve", "--model", model, "--adapters", str(registry)]
    command += ["--port", str(port), "--max-batch", "32", "--max-wait-ms", str(max_wait_ms)]
    process = subprocess.Popen(command, env=_env(threads), stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start: {' '.join(command)}")
            time.sleep(0.5)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=60)


async def drive(
    url: str, adapters: tuple[str, ...], texts: list[str], clients: int, seconds: float, seed: int
) -> dict[str, Any]:
    """`clients` concurrent clients, one text per request, back to back, for `seconds`."""
    latencies: list[float] = []
    failures = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def client(index: int, http: httpx.AsyncClient, stop: float) -> None:
        nonlocal failures
        rng = random.Random(seed * 1000 + index)
        while time.perf_counter() < stop:
            body = {"adapter": rng.choice(adapters), "texts": [rng.choice(texts)]}
            start = time.perf_counter()
            response = await http.post(f"{url}/predict", json=body)
            latencies.append(time.perf_counter() - start)
            failures += response.status_code != 200

    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        start = time.perf_counter()
        stop = start + seconds
        await asyncio.gather(*(client(i, http, stop) for i in range(clients)))
        elapsed = time.perf_counter() - start
    return {"requests": len(latencies), "seconds": elapsed, "failures": failures, "lat": latencies}


def http_cells(
    drive: Drive,
    url: str,
    adapters: tuple[str, ...],
    texts: list[str],
    seconds: float,
    rounds: int,
    rate: Rate,
) -> list[dict[str, Any]]:
    """For each concurrency, `rounds` runs of `drive` to the first of `adapters` ("single") and
    to all of them at random ("mixed"), which goes first alternating: the median rate over the
    rounds, each round's, and the latency over every request."""
    rows = []
    for clients in CONCURRENCY:
        runs: dict[str, list[dict[str, Any]]] = {"single": [], "mixed": []}
        for round_index in range(rounds):
            order = ("single", "mixed") if round_index % 2 == 0 else ("mixed", "single")
            for scenario in order:
                named = adapters[:1] if scenario == "single" else adapters
                run = asyncio.run(drive(url, named, texts, clients, seconds, round_index))
                runs[scenario].append(run)
        for scenario, done in runs.items():
            latencies = np.array([x for run in done for x in run["lat"]]) * 1000
            rates = [r[rate.counted] / r["seconds"] for r in done]
            row = {
                "clients": clients,
                "adapters": 1 if scenario == "single" else len(adapters),
                "scenario": scenario,
                rate.key: statistics.median(rates),
                f"{rate.key}_rounds": [round(r, 2) for r in rates],
                "p50_ms": float(np.percentile(latencies, 50)),
                "p99_ms": float(np.percentile(latencies, 99)),
                "requests": int(latencies.size),
                "failures": sum(r["failures"] for r in done),
            }
            rows.append(row)
            print(
                f"  {clients:>2} clients {scenario:<6} {row[rate.key]:7.1f} {rate.unit}  "
                f"p50 {row['p50_ms']:7.1f} ms  p99 {row['p99_ms']:7.1f} ms",
                flush=True,
            )
    return rows


def heading(benchmark: str, started: float) -> dict[str, Any]:
    """A result's first fields: the benchmark, when and how it ran, and its seconds since
    `started` (`time.perf_counter()`)."""
    return {
        "benchmark": benchmark,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": f"python benchmarks/{benchmark}.py " + " ".join(sys.argv[1:]),
        "wall_seconds": round(time.perf_counter() - started, 1),
    }


def mixed_over_single(cells: list[dict[str, Any]], rate: Rate) -> dict[int, float]:
    """For each concurrency, the mixed cell's rate over the single one's."""
    by_cell = {(r["clients"], r["scenario"]): r[rate.key] for r in cells}
    return {c: by_cell[(c, "mixed")] / by_cell[(c, "single")] for c in CONCURRENCY}


def ratio_check(ratios: dict[int, float], target: float) -> dict[str, Any]:
    """Whether every ratio of `ratios` reaches `target`."""
    return {
        "target": f">= {target}",
        "values": {str(c): round(r, 3) for c, r in ratios.items()},
        "met": all(r >= target for r in ratios.values()),
    }


@contextmanager
def one_adapter_registry(registry: Path, name: str) -> Iterator[Path]:
    """A registry holding a copy of `registry`'s adapter `name` alone, removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        one = Path(tmp) / "registry"
        one.mkdir()
        shutil.copytree(registry / name, one / name)
        yield one


def waves(
    url: str, path: str, body: Callable[[], dict[str, Any]], count: int, timeout: float
) -> None:
    """`count` waves of 32 concurrent posts to `path`, each with a `body()`, all answered
    (within `timeout` seconds each)."""

    async def send() -> None:
        async with httpx.AsyncClient(timeout=timeout) as http:
            for _ in range(count):
                bodies = [body() for _ in range(32)]
                answers = await asyncio.gather(
                    *(http.post(f"{url}{path}", json=made) for made in bodies)
                )
                assert all(a.status_code == 200 for a in answers)

    asyncio.run(send())


def memory_of(pid: int) -> dict[str, float]:
    info = psutil.Process(pid).memory_full_info()
    return {"rss_mb": info.rss / 2**20, "uss_mb": info.uss / 2**20}


def warm(url: str, adapters: tuple[str, ...], texts: list[str]) -> None:
    """Load every adapter, then the same 10 waves of 32 concurrent requests on any server
    (the same texts in the same order; only the adapters differ), so memory compares."""
    for adapter in adapters:
        response = httpx.post(f"{url}/predict", json={"adapter": adapter, "texts": texts[:1]})
        response.raise_for_status()
    pick_text, pick_adapter = random.Random(7), random.Random(8)

    def request_body() -> dict[str, Any]:
        return {"adapter": pick_adapter.choice(adapters), "texts": [pick_text.choice(texts)]}

    waves(url, "/predict", request_body, 10, timeout=120)


def memory_rows(
    five: dict[str, float],
    five_after: dict[str, float],
    registry: Path,
    texts: list[str],
    threads: int,
    wait: float,
) -> dict[str, Any]:
    """One-adapter server memory after the same warm-up; five adapters' against it."""
    with (
        one_adapter_registry(registry, ADAPTERS[0]) as one_registry,
        server(one_registry, threads, wait) as (url, pid),
    ):
        warm(url, ADAPTERS[:1], texts)
        one = memory_of(pid)
    return {
        "one_adapter_process": one,
        "five_adapter_server": five,
        "five_adapter_server_after_all_runs": five_after,
        "five_separate_processes": {k: 5 * v for k, v in one.items()},
        "five_over_one_rss": five["rss_mb"] / one["rss_mb"],
        "five_over_one_uss": five["uss_mb"] / one["uss_mb"],
    }


def peft_comparison(registry: Path, texts: list[str], batches: int) -> dict[str, Any]:
    """The same mixed batches of 32 through adaptlab (contiguous slices) and PEFT."""
    import importlib.metadata

    from peft import PeftModel

    from adaptlab import load_adapter, set_active
    from adaptlab.data import TextEncoder
    from adaptlab.engine.batches import batches as make_batches
    from adaptlab.engine.restore import adapter_folder
    from adaptlab.models.loading import load_model
    from adaptlab.tasks.registry import get_task

    labels = ["fresh", "rotten"]
    loaded = load_model(MODEL, "single_label", label_names=labels)
    model, tokenizer = loaded.model.eval(), loaded.tokenizer
    for name in ADAPTERS:
        load_adapter(model, adapter_folder(registry / name), name=name, activate=False)
    peft_dir = Path(tempfile.mkdtemp(prefix="serve-peft-"))
    for name in ADAPTERS:
        subprocess.run(
            [*CLI, "export", "--adapter", str(registry / name), "--format", "peft"]
            + ["--model", MODEL, str(peft_dir / name)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        config_path = peft_dir / name / "adapter_config.json"
        config = json.loads(config_path.read_text())
        config["modules_to_save"] = ["bert.pooler.dense", "classifier"]
        config_path.write_text(json.dumps(config))
    base = load_model(MODEL, "single_label", label_names=labels).model.eval()
    peft = PeftModel.from_pretrained(base, str(peft_dir / ADAPTERS[0]), adapter_name=ADAPTERS[0])
    for name in ADAPTERS[1:]:
        peft.load_adapter(str(peft_dir / name), adapter_name=name)
    peft.eval()
    shutil.rmtree(peft_dir)

    encoder = TextEncoder(tokenizer, get_task("single_label"), len(labels), 128)

    def tensors(chunk: list[str]) -> dict[str, torch.Tensor]:
        features = encoder.encode([get_task("single_label").placeholder(t) for t in chunk])
        batch = next(iter(make_batches(encoder, features, len(chunk), torch.device("cpu"))))
        batch.pop("labels")
        return batch

    rng = random.Random(0)
    work = []
    for _ in range(batches):
        chunk = rng.sample(texts, 32)
        routes = [rng.choice(ADAPTERS) for _ in chunk]
        groups = {
            name: [i for i, r in enumerate(routes) if r == name] for name in dict.fromkeys(routes)
        }
        sliced = {name: tensors([chunk[i] for i in rows]) for name, rows in groups.items()}
        work.append((tensors(chunk), routes, groups, sliced))

    @torch.no_grad()
    def run_adaptlab(item: Any) -> dict[str, torch.Tensor]:
        _, _, _, sliced = item
        out = {}
        for name, batch in sliced.items():
            set_active(model, name)
            out[name] = model(**batch).logits
        return out

    @torch.no_grad()
    def run_peft(item: Any) -> torch.Tensor:
        whole, routes, _, _ = item
        return peft(**whole, adapter_names=routes).logits  # type: ignore[no-any-return]

    @torch.no_grad()
    def run_single(item: Any) -> torch.Tensor:
        whole = item[0]
        set_active(model, ADAPTERS[0])
        return model(**whole).logits  # type: ignore[no-any-return]

    worst = 0.0
    for item in work[:3]:
        ours, theirs = run_adaptlab(item), run_peft(item)
        for name, rows in item[2].items():
            worst = max(worst, float((ours[name] - theirs[rows]).abs().max()))
    timings: dict[str, list[float]] = {"adaptlab": [], "peft": [], "adaptlab_one_adapter": []}
    runners = {"adaptlab": run_adaptlab, "peft": run_peft, "adaptlab_one_adapter": run_single}
    for round_index in range(3):
        names = list(runners) if round_index % 2 == 0 else list(reversed(runners))
        for key in names:
            start = time.perf_counter()
            for item in work:
                runners[key](item)
            timings[key].append(32 * len(work) / (time.perf_counter() - start))
    rates = {key: statistics.median(values) for key, values in timings.items()}
    return {
        "batch": 32,
        "batches": batches,
        "texts_per_second": rates,
        "texts_per_second_rounds": timings,
        "adaptlab_over_peft": rates["adaptlab"] / rates["peft"],
        "max_abs_logit_difference": worst,
        "peft_version": importlib.metadata.version("peft"),
    }


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    train_adapters(args.adapters, args.threads)
    from adaptlab.data import load_dataset
    from adaptlab.tasks.registry import LABELLED

    texts = [e.text for e in load_dataset(DATA, LABELLED).splits["test"]]
    assert all(isinstance(t, str) for t in texts)
    load_before = os.getloadavg()
    print("HTTP (adaptlab serve, one text per request)", flush=True)
    with server(args.adapters, args.threads, args.max_wait_ms) as (url, pid):
        warm(url, ADAPTERS, texts)  # type: ignore[arg-type]
        five = memory_of(pid)
        cells = http_cells(drive, url, ADAPTERS, texts, args.seconds, args.rounds, REQUESTS)  # type: ignore[arg-type]
        five_after = memory_of(pid)
        loaded = httpx.get(f"{url}/health").json()["loaded"]
    assert loaded == len(ADAPTERS)
    print("memory", flush=True)
    memory = memory_rows(five, five_after, args.adapters, texts, args.threads, args.max_wait_ms)  # type: ignore[arg-type]
    print("against PEFT (in process, mixed batches of 32)", flush=True)
    peft = peft_comparison(args.adapters, texts, args.peft_batches)  # type: ignore[arg-type]

    ratios = mixed_over_single(cells, REQUESTS)
    checks = {
        "mixed_over_single": ratio_check(ratios, TARGETS["mixed_over_single"]),
        "memory_five_over_one": {
            "target": f"<= {TARGETS['memory_over_one']}",
            "value_rss": round(memory["five_over_one_rss"], 3),
            "value_uss": round(memory["five_over_one_uss"], 3),
            "met": memory["five_over_one_rss"] <= TARGETS["memory_over_one"],
        },
        "adaptlab_over_peft": {
            "target": f">= {TARGETS['adaptlab_over_peft']}",
            "value": round(peft["adaptlab_over_peft"], 3),
            "met": peft["adaptlab_over_peft"] >= TARGETS["adaptlab_over_peft"],
        },
        "no_failed_requests": sum(r["failures"] for r in cells) == 0,
        "same_logits_as_peft": peft["max_abs_logit_difference"] < 1e-4,
    }
    result = {
        **heading("serve", started),
        "settings": {
            "model": MODEL,
            "adapters": list(ADAPTERS),
            "adapter_training": "adaptlab train --method lora --data rotten-tomatoes "
            "--train-size 200 --epochs 1 --seed 0..4",
            "seconds_per_cell": args.seconds,
            "rounds": args.rounds,
            "torch_threads_per_process": args.threads,
            "server": f"--max-batch 32 --max-wait-ms {args.max_wait_ms}",
            "texts_per_request": 1,
        },
        "machine": machine(load_before),
        "http": cells,
        "memory": memory,
        "peft": peft,
        "checks": checks,
    }
    print(format_table(result))
    write_json(result, args.out)


def format_table(result: dict[str, Any]) -> str:
    lines = [
        "| clients | adapters | req/s | p50 ms | p99 ms | mixed / single |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    ratios = result["checks"]["mixed_over_single"]["values"]
    for row in result["http"]:
        ratio = ratios[str(row["clients"])] if row["scenario"] == "mixed" else ""
        lines.append(
            f"| {row['clients']} | {row['adapters']} | {row['throughput_rps']:.1f} | "
            f"{row['p50_ms']:.1f} | {row['p99_ms']:.1f} | {ratio} |"
        )
    memory = result["memory"]
    lines += [
        "",
        "| process | RSS MB | USS MB |",
        "|---|---:|---:|",
        *(
            f"| {label} | {memory[key]['rss_mb']:.0f} | {memory[key]['uss_mb']:.0f} |"
            for key, label in (
                ("one_adapter_process", "server, 1 adapter"),
                ("five_adapter_server", "server, 5 adapters"),
                ("five_adapter_server_after_all_runs", "server, 5 adapters, after all runs"),
                ("five_separate_processes", "5 separate 1-adapter processes"),
            )
        ),
        f"five / one: RSS {memory['five_over_one_rss']:.3f}, USS {memory['five_over_one_uss']:.3f}",
        "",
        "| mixed batches of 32 | texts/s |",
        "|---|---:|",
        *(f"| {k} | {v:.1f} |" for k, v in result["peft"]["texts_per_second"].items()),
        f"adaptlab / peft: {result['peft']['adaptlab_over_peft']:.3f} "
        f"(max |logit difference| {result['peft']['max_abs_logit_difference']:.1e})",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()

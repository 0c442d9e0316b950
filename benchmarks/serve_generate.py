"""`adaptlab serve` generating text: tokens per second with one adapter and with four mixed,
and the memory of four adapters in one server against one process per adapter.

On SmolLM2-135M (`smollm2-135m`) with four LoRA adapters (rank 8 on the query and value
projections, random tensors: throughput and memory do not depend on what an adapter learnt),
saved once under `--adapters`:

1. **HTTP.** The real server (`adaptlab serve`, its own process, `--threads` torch threads) is
   driven by 1, 8 and 32 concurrent httpx clients posting `/v1/completions` back to back for
   `--seconds` per cell: a short prompt (the first words of a Rotten Tomatoes test review),
   `--max-tokens` new tokens, greedy. All requests name one adapter, or each names one of the
   four at random. Cells alternate one / mixed over `--rounds`; tokens per second (completion
   tokens from each answer's `usage`) is the median over rounds, latency over every request.
2. **Memory.** The server's resident set (RSS, USS) after the same warm-up (every model once,
   then 4 waves of 32 concurrent completions over the prompts, all to the one adapter or mixed)
   with four adapters, against a server holding one: "one process per adapter" is four times
   the latter. In this process, the bytes of every distinct tensor of the model with one and
   with four adapters loaded.
3. **One forward or four.** In this process, a decode step of 32 sequences spread over the four
   adapters as the server runs it (one forward, each adapter on its rows: `Rows`) against one
   forward per adapter (how `/predict` runs each adapter's slice); median of 3 rounds of 20.

Usage (from the repository root; about 10 minutes on 2 busy cores)::

    .venv/bin/python benchmarks/serve_generate.py
    .venv/bin/python benchmarks/serve_generate.py --seconds 10 --rounds 1     # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import serve
import torch
from report_file import machine, write_json

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUT = BENCH_DIR / "results" / "serve_generate.json"
DEFAULT_ADAPTERS = BENCH_DIR.parent / "runs" / "serve-generate-bench"
MODEL = "smollm2-135m"
ADAPTERS = tuple(f"lm-lora-{seed}" for seed in range(4))
TOKENS = serve.Rate("tokens_per_second", "tokens", "tokens/s")
TARGETS = {"mixed_over_single": 0.8, "memory_four_over_one": 1.2}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--adapters", type=Path, default=DEFAULT_ADAPTERS)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seconds", type=float, default=20.0, help="per cell and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=16, help="new tokens per request")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    return parser.parse_args()


def make_adapters(folder: Path) -> None:
    """Four LoRA adapters with random tensors on the causal LM, unless already there."""
    import adaptlab
    from adaptlab.models.loading import load_model

    if all((folder / name / "manifest.json").is_file() for name in ADAPTERS):
        return
    model = load_model(MODEL, "causal_lm").model
    for seed, name in enumerate(ADAPTERS):
        handle = adaptlab.add_adapter(model, name, "lora", seed=seed, train_head=False)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for tensor in handle.tensors().values():
                tensor.add_(0.05 * torch.randn(tensor.shape, generator=generator))
        adaptlab.save_adapter(model, folder / name, name=name, base_model_id=MODEL)


def prompts() -> list[str]:
    """Short prompts: the first eight words of each Rotten Tomatoes test review."""
    from adaptlab.data import load_dataset
    from adaptlab.tasks.registry import LABELLED

    texts = [str(e.text) for e in load_dataset("rotten-tomatoes", LABELLED).splits["test"]]
    return [" ".join(text.split()[:8]) for text in texts if len(text.split()) >= 8]


async def drive(
    url: str, models: tuple[str, ...], texts: list[str], clients: int, seconds: float, seed: int
) -> dict[str, Any]:
    """`clients` concurrent clients, one completion per request, back to back."""
    latencies: list[float] = []
    tokens, failures = 0, 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def client(index: int, http: httpx.AsyncClient, stop: float) -> None:
        nonlocal tokens, failures
        rng = random.Random(seed * 1000 + index)
        while time.perf_counter() < stop:
            body = {"model": rng.choice(models), "prompt": rng.choice(texts), "temperature": 0}
            start = time.perf_counter()
            response = await http.post(f"{url}/v1/completions", json={**body, **MAX})
            latencies.append(time.perf_counter() - start)
            if response.status_code == 200:
                tokens += response.json()["usage"]["completion_tokens"]
            else:
                failures += 1

    async with httpx.AsyncClient(timeout=600, limits=limits) as http:
        start = time.perf_counter()
        await asyncio.gather(*(client(i, http, start + seconds) for i in range(clients)))
        elapsed = time.perf_counter() - start
    return {"tokens": tokens, "seconds": elapsed, "failures": failures, "lat": latencies}


MAX: dict[str, int] = {}
"""The `max_tokens` every request asks for (set from --max-tokens)."""


def warm(url: str, models: tuple[str, ...], texts: list[str]) -> None:
    """Every model once, then 4 waves of 32 concurrent completions (the same prompts on any
    server; only the models named differ), so memory compares."""
    for model in (MODEL, *models):
        body = {"model": model, "prompt": texts[0], "max_tokens": 2}
        httpx.post(f"{url}/v1/completions", json=body, timeout=600).raise_for_status()
    pick_text, pick_model = random.Random(7), random.Random(8)

    def request_body() -> dict[str, Any]:
        return {"model": pick_model.choice(models), "prompt": pick_text.choice(texts), **MAX}

    serve.waves(url, "/v1/completions", request_body, 4, timeout=600)


def one_adapter_memory(registry: Path, texts: list[str], threads: int) -> dict[str, float]:
    """A server holding one adapter, after the same warm-up."""
    with (
        serve.one_adapter_registry(registry, ADAPTERS[0]) as one,
        server_on(one, threads) as (url, pid),
    ):
        warm(url, ADAPTERS[:1], texts)
        return serve.memory_of(pid)


def server_on(registry: Path, threads: int) -> Any:
    """The benchmark's server: `adaptlab serve` on SmolLM2 with `registry`."""
    return serve.server(registry, threads, 5.0, model=MODEL)


def tensor_bytes(registry: Path) -> dict[str, int]:
    """Bytes of every distinct tensor of the causal LM with one and with four adapters."""
    import adaptlab
    from adaptlab.models.loading import load_model

    model = load_model(MODEL, "causal_lm").model

    def distinct() -> int:
        storages = {
            t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in _all(model)
        }
        return sum(storages.values())

    counts = {"base": distinct()}
    for index, name in enumerate(ADAPTERS):
        adaptlab.load_adapter(model, registry / name, activate=False)
        if index in (0, len(ADAPTERS) - 1):
            counts[f"{index + 1}_adapters"] = distinct()
    return counts


def _all(model: torch.nn.Module) -> list[torch.Tensor]:
    """Every parameter and buffer, the adapters' inserted modules included."""
    return [*model.parameters(), *model.buffers()]


def one_forward_or_four(registry: Path) -> dict[str, Any]:
    """A decode step of 32 sequences over four adapters: one forward with `Rows` or four."""
    import adaptlab
    from adaptlab.engine.kv import KVRows, new_cache
    from adaptlab.engine.rows import Rows
    from adaptlab.models.loading import load_model

    loaded = load_model(MODEL, "causal_lm")
    model = loaded.model.eval()
    for name in ADAPTERS:
        adaptlab.load_adapter(model, registry / name, activate=False)
    ids = torch.tensor([loaded.tokenizer("a film whose plot is thin").input_ids] * 32)
    with torch.no_grad():
        adaptlab.set_active(model, None)
        out = model(input_ids=ids, past_key_values=new_cache(model), use_cache=True)
    kv = KVRows(out.past_key_values, torch.ones_like(ids))
    rows = Rows([(name, 8 * i, 8 * i + 8) for i, name in enumerate(ADAPTERS)])
    last = ids[:, -1:]

    @torch.no_grad()
    def step(composition: Any, part: slice) -> None:
        part_kv = kv.take(torch.arange(32)[part])  # a copy: every run starts from the prompt
        adaptlab.set_active(model, composition)
        model(input_ids=last[part], past_key_values=part_kv.cache, use_cache=True)

    def mixed() -> None:
        step(rows, slice(0, 32))

    def separate() -> None:
        for i, name in enumerate(ADAPTERS):
            step(name, slice(8 * i, 8 * i + 8))

    timings: dict[str, list[float]] = {"one_forward_rows": [], "one_forward_per_adapter": []}
    runners = {"one_forward_rows": mixed, "one_forward_per_adapter": separate}
    for runner in runners.values():  # a first call of each, untimed
        runner()
    for round_index in range(3):
        names = list(runners) if round_index % 2 == 0 else list(reversed(runners))
        for key in names:
            start = time.perf_counter()
            for _ in range(20):
                runners[key]()
            timings[key].append((time.perf_counter() - start) / 20 * 1000)
    medians = {key: statistics.median(values) for key, values in timings.items()}
    return {
        "step_ms": medians,
        "step_ms_rounds": timings,
        "per_adapter_over_rows": medians["one_forward_per_adapter"] / medians["one_forward_rows"],
    }


def main() -> None:
    args = parse_args()
    MAX["max_tokens"] = args.max_tokens
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    make_adapters(args.adapters)
    texts = prompts()
    load_before = os.getloadavg()
    print("HTTP (adaptlab serve, /v1/completions)", flush=True)
    with server_on(args.adapters, args.threads) as (url, pid):
        warm(url, ADAPTERS, texts)
        four = serve.memory_of(pid)
        cells = serve.http_cells(drive, url, ADAPTERS, texts, args.seconds, args.rounds, TOKENS)
        four_after = serve.memory_of(pid)
    print("memory", flush=True)
    one = one_adapter_memory(args.adapters, texts, args.threads)
    tensors = tensor_bytes(args.adapters)
    print("one forward or four (in process)", flush=True)
    forwards = one_forward_or_four(args.adapters)
    ratios = serve.mixed_over_single(cells, TOKENS)
    memory = {
        "one_adapter_server": one,
        "four_adapter_server": four,
        "four_adapter_server_after_all_runs": four_after,
        "one_process_per_adapter": {k: 4 * v for k, v in one.items()},
        "four_over_one_rss": four["rss_mb"] / one["rss_mb"],
        "four_over_one_uss": four["uss_mb"] / one["uss_mb"],
        "tensor_bytes": tensors,
        "four_over_one_tensor_bytes": tensors["4_adapters"] / tensors["1_adapters"],
    }
    checks = {
        "mixed_over_single": serve.ratio_check(ratios, TARGETS["mixed_over_single"]),
        "memory_four_over_one": {
            "target": f"<= {TARGETS['memory_four_over_one']}",
            "value_rss": round(memory["four_over_one_rss"], 3),
            "value_uss": round(memory["four_over_one_uss"], 3),
            "value_tensor_bytes": round(memory["four_over_one_tensor_bytes"], 4),
            "met": memory["four_over_one_rss"] <= TARGETS["memory_four_over_one"],
        },
        "no_failed_requests": sum(r["failures"] for r in cells) == 0,
    }
    result = {
        **serve.heading("serve_generate", started),
        "settings": {
            "model": MODEL,
            "adapters": list(ADAPTERS),
            "adapter_method": "lora rank 8 on q_proj and v_proj, random tensors",
            "prompt": "first 8 words of a Rotten Tomatoes test review",
            "max_tokens": args.max_tokens,
            "temperature": 0,
            "seconds_per_cell": args.seconds,
            "rounds": args.rounds,
            "torch_threads_per_process": args.threads,
            "server": "--max-batch 32 --max-wait-ms 5",
        },
        "machine": machine(load_before),
        "http": cells,
        "mixed_over_single": {str(c): r for c, r in ratios.items()},
        "memory": memory,
        "one_forward_or_four": forwards,
        "checks": checks,
    }
    print(json.dumps(checks, indent=2))
    write_json(result, args.out)


if __name__ == "__main__":
    main()

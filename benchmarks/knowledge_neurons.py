"""Knowledge-neuron attribution per prompt: adaptlab against `knowledge-neurons`, time and error.

Models (random weights, seed 0), saved to a temporary folder that both sides load:

- `--size base` (the default), the shapes of the knowledge-neuron slides: a BERT-base masked
  LM (12 layers, hidden 768, FFN 3,072, 12 heads) over the real MiniLM word-piece vocabulary
  (30,522 pieces), and a GPT-Neo-125M causal LM (12 layers, 768, 3,072, 12 heads, global and
  local attention alternating) over the real SmolLM2 vocabulary (49,152); knowledge-neurons
  knows BERT, GPT-2 and GPT-Neo, adaptlab's backbone discovery GPT-Neo, not GPT-2's Conv1D;
- `--size tiny`: the same architectures with 4 layers, hidden 64, FFN 256, 4 heads (a quick
  check; there the vocabulary-sized LM head is most of the work).

Prompts: `--prompts` countries with one-token capitals (4 by default at base size, 8 tiny) in
a short template (9 tokens with BERT's [CLS] and [SEP], 5 for the causal model) and a long one
(21 and 17). Both sides compute integrated gradients of P(answer) over every FFN intermediate
neuron of every layer, with one torch thread each, on the CPU or (`--device cuda`) a GPU:

- adaptlab: `adaptlab.knowledge.attribute` with its default, the adaptive Gauss-Lobatto
  quadrature (tolerance 1e-2; all layers in one growing batch from one unmodified row, the LM
  head on the answer position only, a causal LM's prompt read once); and, as a second
  column, the same with the slides' right Riemann sum, m = 20 (`rule="riemann"`);
- knowledge-neurons==0.0.2: `KnowledgeNeurons.get_scores(prompt, answer, steps=20,
  batch_size=20)` (one batch per layer, its fastest setting; alpha = linspace(0, 1, 20), each
  weighted 1/20). It runs in an overlay venv, benchmarks/.venv-kn (benchmarks/overlay_venv.py:
  the package and einops; torch and transformers come from .venv), in a subprocess that times
  itself, so process start-up is not counted (started with `python -P`, so this script's
  folder does not shadow the `knowledge_neurons` package). `--peer-python` names another
  interpreter that imports knowledge_neurons instead of the overlay.

Times: median seconds per prompt over `--rounds` rounds (2 at base size, 5 tiny; each round
attributes every prompt once, after one untimed warm-up prompt; scores are copied to the CPU
inside the timed loop), in wall-clock and in CPU seconds of the process (one thread each, so
the CPU figure shows the work done when other jobs share the machine). On the CPU as many
more rounds of adaptlab's default run under torch.profiler, which reports each phase's share
of its time (a causal LM's prompt cache, the batches' forward passes, the closed-form LM head,
the backward passes).

Error: for every prompt, each side's scores S against a converged reference R of the integral
that side computes, ||S - R|| / ||R|| over all layers and neurons. The reference is computed
once per prompt, outside both libraries, in the plainest way: per layer, a forward hook on
the neurons' module replaces the answer position's activations by α w̄ in a batch of nodes,
the whole prompt runs through the model, P(answer) is the softmax at the answer position and
autograd gives dP/dw; the nodes are composite Gauss-Legendre, 4 intervals x 8 nodes (exact to
degree 15 on each quarter). Its own error is bounded by comparing it with 2 intervals x 8
nodes (`reference_check` in the JSON). (A right Riemann sum with m = 512 would not do: its
error, of order 1/(2m) = 1e-3, is larger than what it would measure.) For BERT both sides
attribute the same neurons, the output of the FFN's activation, so one reference serves both.
For GPT-Neo knowledge-neurons patches the output of `mlp.c_fc`, the FFN's input projection
*before* its activation, while adaptlab (and the paper) attribute the activation's output,
the input of `mlp.c_proj`: each side is measured against the reference of its own integral.

Usage: ``.venv/bin/python benchmarks/knowledge_neurons.py [--size tiny] [--device cuda]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import transformers
from torch import nn

BENCH_DIR = Path(__file__).resolve().parent
PEER_VENV = BENCH_DIR / ".venv-kn"
PEER_PACKAGES = ("knowledge-neurons==0.0.2", "einops==0.8.2")
DEFAULT_OUT = BENCH_DIR / "results" / "knowledge_neurons.json"
STEPS = 20
COUNTRIES = {
    "France": "Paris", "Peru": "Lima", "Japan": "Tokyo", "Italy": "Rome",
    "Germany": "Berlin", "Spain": "Madrid", "Egypt": "Cairo", "England": "London",
}  # fmt: skip
LONG = "According to the atlas we used at school, the capital city of the country [X] is [Y]"
CASES = {
    "bert, short": ("bert", "The capital of [X] is [Y]."),
    "bert, long": ("bert", LONG + "."),
    "gpt-neo, short": ("gpt", "The capital of [X] is [Y]"),
    "gpt-neo, long": ("gpt", LONG),
}
"""name -> (model kind, template); causal templates end with [Y]."""
PHASES = ("prompt", "forward", "head", "backward")
"""adaptlab's profiler labels (adaptlab.knowledge.attribution.PHASE)."""
SIZES = {
    "base": {"layers": 12, "hidden": 768, "ffn": 3072, "heads": 12},
    "tiny": {"layers": 4, "hidden": 64, "ffn": 256, "heads": 4},
}
NAMES = {
    "bert": ("BERT-base", "BERT masked LM, MiniLM vocabulary"),
    "gpt": ("GPT-Neo-125M", "GPT-Neo causal LM, SmolLM2 vocabulary"),
}
REFERENCE = (4, 8)
"""Composite Gauss-Legendre of the reference: intervals, nodes per interval."""
SITES = {
    ("bert", "ours"): "bert.encoder.layer.{}.intermediate",
    ("bert", "peer"): "bert.encoder.layer.{}.intermediate",
    ("gpt", "ours"): "transformer.h.{}.mlp.act",
    ("gpt", "peer"): "transformer.h.{}.mlp.c_fc",
}
"""The module whose output each side's neurons are, per layer."""


def prompts(kind: str, template: str, count: int) -> list[tuple[str, str, str]]:
    """(peer prompt, subject, answer) per country: BERT's prompt holds [MASK] and its answer is
    the lower-case word piece; a causal prompt stops before [Y] and its answer has its space."""
    chosen = list(COUNTRIES.items())[:count]
    if kind == "bert":
        return [
            (template.replace("[X]", s).replace("[Y]", "[MASK]"), s, a.lower()) for s, a in chosen
        ]
    return [(template.replace("[X]", s).split(" [Y]")[0], s, a) for s, a in chosen]


def save_model(kind: str, size: str, folder: Path) -> dict[str, int]:
    """The random model of `kind` and `size` with its real tokenizer; returns its shape."""
    import transformers as T

    from adaptlab.models import load_tokenizer

    shape = SIZES[size]
    tokenizer = load_tokenizer("minilm-l6" if kind == "bert" else "smollm2-135m")
    torch.manual_seed(0)
    if kind == "bert":
        config = T.BertConfig(
            vocab_size=len(tokenizer),
            num_hidden_layers=shape["layers"],
            num_attention_heads=shape["heads"],
            hidden_size=shape["hidden"],
            intermediate_size=shape["ffn"],
        )
        model: Any = T.BertForMaskedLM(config)
    else:
        config = T.GPTNeoConfig(
            vocab_size=len(tokenizer),
            num_layers=shape["layers"],
            attention_types=[[["global", "local"], shape["layers"] // 2]],
            num_heads=shape["heads"],
            hidden_size=shape["hidden"],
            intermediate_size=shape["ffn"],
            max_position_embeddings=2048,
        )
        model = T.GPTNeoForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return {**shape, "vocabulary": len(tokenizer)}


def time_ours(
    kind: str, folder: Path, template: str, args: argparse.Namespace, rule: str
) -> tuple[list[float], list[float], list[torch.Tensor], dict[str, float] | None]:
    """adaptlab with quadrature `rule`: wall and CPU seconds per prompt per round, the scores of
    the last round, and on the CPU for the default rule each phase's share in as many profiled
    rounds."""
    from adaptlab.knowledge import attribute, load_lm

    lm = load_lm(str(folder), device=args.device)
    items = prompts(kind, template, args.prompts)
    steps = STEPS if rule == "riemann" else None
    attribute(lm, template, items[0][1], items[0][2], steps, rule)  # warm-up
    times, cpu_times, scores = [], [], []
    for _ in range(args.rounds):
        start, cpu_start = time.perf_counter(), time.process_time()
        scores = [attribute(lm, template, s, a, steps, rule).scores for _, s, a in items]
        times.append((time.perf_counter() - start) / len(items))
        cpu_times.append((time.process_time() - cpu_start) / len(items))
    if torch.device(args.device).type != "cpu" or rule == "riemann":
        return times, cpu_times, scores, None

    def work() -> None:
        for _ in range(args.rounds):
            for _, s, a in items:
                attribute(lm, template, s, a, steps, rule)

    return times, cpu_times, scores, phase_shares(work)


def phase_shares(work: Callable[[], object]) -> dict[str, float]:
    """Each labelled phase's CPU time in `work`, as a share of its wall time under the profiler
    (which slows many-operation phases most); "other" is the rest: tokens, hooks, results."""
    from torch.profiler import ProfilerActivity, profile

    from adaptlab.knowledge.attribution import PHASE

    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        start = time.perf_counter()
        work()
        wall_us = (time.perf_counter() - start) * 1e6
    totals = {e.key: e.cpu_time_total for e in profiler.key_averages() if e.key.startswith(PHASE)}
    shares = {name: totals.get(PHASE + name, 0.0) / wall_us for name in PHASES}
    return {**shares, "other": 1.0 - sum(shares.values())}


def peer_worker(kind: str, folder: str, template: str, args: argparse.Namespace, out: str) -> None:
    """Runs inside .venv-kn: time knowledge-neurons and save its scores."""
    import transformers as T
    from knowledge_neurons import KnowledgeNeurons
    from safetensors.torch import save_file

    tokenizer = T.AutoTokenizer.from_pretrained(folder)
    model_class = T.AutoModelForMaskedLM if kind == "bert" else T.AutoModelForCausalLM
    model = model_class.from_pretrained(folder).eval()
    kn = KnowledgeNeurons(model, tokenizer, model_type=kind, device=args.device)
    items = prompts(kind, template, args.prompts)

    def run(prompt: str, answer: str) -> torch.Tensor:
        target = answer if kind == "bert" else " " + answer
        scores = kn.get_scores(prompt, target, batch_size=STEPS, steps=STEPS, pbar=False)
        return scores.detach().cpu()

    run(items[0][0], items[0][2])  # warm-up
    times, cpu_times, scores = [], [], []
    for _ in range(args.rounds):
        start, cpu_start = time.perf_counter(), time.process_time()
        scores = [run(prompt, answer) for prompt, _, answer in items]
        times.append((time.perf_counter() - start) / len(items))
        cpu_times.append((time.process_time() - cpu_start) / len(items))
    save_file({f"p{i}": s.contiguous() for i, s in enumerate(scores)}, out)
    timing = {"times": times, "cpu_times": cpu_times}
    Path(out).with_suffix(".json").write_text(json.dumps(timing))


def composite_gauss_legendre(intervals: int, nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Nodes and weights on [0, 1]: `nodes` Gauss-Legendre points on each of `intervals`."""
    import numpy as np

    x, w = np.polynomial.legendre.leggauss(nodes)
    alphas = [(i + (xk + 1) / 2) / intervals for i in range(intervals) for xk in x]
    weights = [wk / 2 / intervals for _ in range(intervals) for wk in w]
    return torch.tensor(alphas, dtype=torch.float64), torch.tensor(weights, dtype=torch.float64)


def reference_scores(
    model: Any, kind: str, site: str, ids: torch.Tensor, position: int, target: int, rule: Any
) -> torch.Tensor:
    """(layers, neurons) ∫_0^1 w̄ dP(α w̄)/dw dα by the quadrature `rule` (nodes, weights):
    per layer, a batch of nodes through the whole prompt, a forward hook on the site module."""
    alphas, weights = rule
    body, head = (model.bert, model.cls) if kind == "bert" else (model.transformer, model.lm_head)
    options = {} if kind == "bert" else {"use_cache": False}
    scores = []
    for layer in range(model.config.num_hidden_layers):
        module: nn.Module = model.get_submodule(site.format(layer))
        seen: list[torch.Tensor] = []
        handle = module.register_forward_hook(_keeping(position, seen))
        with torch.no_grad():
            body(input_ids=ids, **options)
        handle.remove()
        activation = seen[0].detach()
        total = torch.zeros_like(activation, dtype=torch.float64)
        for chunk in torch.arange(len(alphas)).split(16):
            scaled = (alphas[chunk, None].float() * activation).requires_grad_(True)
            handle = module.register_forward_hook(_replacing(position, scaled))
            hidden = body(input_ids=ids.expand(len(chunk), -1), **options)[0][:, position]
            handle.remove()
            probability = head(hidden).softmax(-1)[:, target]
            (grad,) = torch.autograd.grad(probability.sum(), scaled)
            total += weights[chunk] @ grad.double()
        scores.append(activation.double() * total)
    return torch.stack(scores)


def _keeping(position: int, seen: list[torch.Tensor]) -> Callable[..., None]:
    """A forward hook: appends the module's output at `position` (row 0) to `seen`."""

    def keep(_: nn.Module, __: Any, output: torch.Tensor) -> None:
        seen.append(output[0, position])

    return keep


def _replacing(position: int, values: torch.Tensor) -> Callable[..., torch.Tensor]:
    """A forward hook: the module's output at `position` becomes `values` (one per row)."""

    def replace(_: nn.Module, __: Any, output: torch.Tensor) -> torch.Tensor:
        output = output.clone()
        output[:, position] = values
        return output

    return replace


def references(
    kind: str, folder: Path, template: str, count: int, side: str
) -> tuple[list[torch.Tensor], float]:
    """The reference scores of each prompt for `side` (ours or peer) and the largest relative
    difference between the reference and its half-resolution check."""
    import transformers as T

    from adaptlab.knowledge import load_lm
    from adaptlab.knowledge.prompts import token_queries

    lm = load_lm(str(folder))  # only for the token queries
    model_class = T.AutoModelForMaskedLM if kind == "bert" else T.AutoModelForCausalLM
    model = model_class.from_pretrained(folder).eval().requires_grad_(False)
    intervals, nodes = REFERENCE
    found, checks = [], []
    for _, subject, answer in prompts(kind, template, count):
        (query,) = token_queries(lm, template, subject, answer)
        ids, position, target = query.input_ids[None], query.position, query.target
        site = SITES[kind, side]
        best = reference_scores(
            model, kind, site, ids, position, target, composite_gauss_legendre(intervals, nodes)
        )
        half = reference_scores(
            model,
            kind,
            site,
            ids,
            position,
            target,
            composite_gauss_legendre(intervals // 2, nodes),
        )
        found.append(best)
        checks.append(relative_error(half, best))
    return found, max(checks)


def relative_error(found: torch.Tensor, reference: torch.Tensor) -> float:
    return float((found.double() - reference).norm() / reference.norm())


def compare(
    python: Path, kind: str, folder: Path, template: str, args: argparse.Namespace
) -> dict[str, Any]:
    """Both sides on the prompts of one template: times, speed-up, errors against the reference."""
    from safetensors.torch import load_file

    ours_times, ours_cpu, ours_scores, phases = time_ours(kind, folder, template, args, "adaptive")
    riemann_times, riemann_cpu, riemann_scores, _ = time_ours(
        kind, folder, template, args, "riemann"
    )
    peer_out = folder.parent / "peer.safetensors"
    worker = [str(python), "-P", __file__, "--prompts", str(args.prompts)]
    worker += ["--rounds", str(args.rounds), "--device", args.device]
    subprocess.run([*worker, "--worker", kind, str(folder), template, str(peer_out)], check=True)
    peer_loaded = load_file(str(peer_out))
    peer_scores = [peer_loaded[f"p{i}"] for i in range(len(ours_scores))]
    peer_timing = json.loads(peer_out.with_suffix(".json").read_text())
    peer_times, peer_cpu = peer_timing["times"], peer_timing["cpu_times"]
    ours_reference, ours_check = references(kind, folder, template, args.prompts, "ours")
    if SITES[kind, "ours"] == SITES[kind, "peer"]:
        peer_reference, peer_check = ours_reference, ours_check
    else:
        peer_reference, peer_check = references(kind, folder, template, args.prompts, "peer")

    def errors(scores: list[torch.Tensor], reference: list[torch.Tensor]) -> list[float]:
        return [relative_error(s, r) for s, r in zip(scores, reference, strict=True)]

    ours_s, peer_s = statistics.median(ours_times), statistics.median(peer_times)
    ours_cpu_s, peer_cpu_s = statistics.median(ours_cpu), statistics.median(peer_cpu)
    ours_errors = errors(ours_scores, ours_reference)
    peer_errors = errors(peer_scores, peer_reference)
    riemann_errors = errors(riemann_scores, ours_reference)
    return {
        "template": template,
        "tokens": len(prompt_ids(kind, folder, template)),
        "prompts": len(ours_scores),
        "adaptlab_s_per_prompt": ours_s,
        "knowledge_neurons_s_per_prompt": peer_s,
        "speedup": peer_s / ours_s,
        "adaptlab_cpu_s_per_prompt": ours_cpu_s,
        "knowledge_neurons_cpu_s_per_prompt": peer_cpu_s,
        "speedup_cpu": peer_cpu_s / ours_cpu_s,
        "adaptlab_riemann20_s_per_prompt": statistics.median(riemann_times),
        "adaptlab_riemann20_cpu_s_per_prompt": statistics.median(riemann_cpu),
        "adaptlab_error_max": max(ours_errors),
        "knowledge_neurons_error_max": max(peer_errors),
        "adaptlab_riemann20_error_max": max(riemann_errors),
        "adaptlab_errors": ours_errors,
        "knowledge_neurons_errors": peer_errors,
        "adaptlab_riemann20_errors": riemann_errors,
        "reference_check": {"adaptlab": ours_check, "knowledge_neurons": peer_check},
        "same_neurons": SITES[kind, "ours"] == SITES[kind, "peer"],
        "adaptlab_phase_shares": phases,
        "adaptlab_times": ours_times,
        "adaptlab_riemann20_times": riemann_times,
        "knowledge_neurons_times": peer_times,
        "adaptlab_cpu_times": ours_cpu,
        "adaptlab_riemann20_cpu_times": riemann_cpu,
        "knowledge_neurons_cpu_times": peer_cpu,
    }


def prompt_ids(kind: str, folder: Path, template: str) -> list[int]:
    """The tokens the model reads for the first prompt (what the peer reads, too)."""
    import transformers as T

    tokenizer = T.AutoTokenizer.from_pretrained(folder)
    return list(tokenizer(prompts(kind, template, 1)[0][0])["input_ids"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="base")
    parser.add_argument("--prompts", type=int, help="countries per case (4 base, 8 tiny)")
    parser.add_argument("--rounds", type=int, help="timed rounds (2 base, 5 tiny)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (both sides)")
    parser.add_argument("--peer-python", type=Path, help="an interpreter with knowledge_neurons")
    parser.add_argument("--out", type=Path, help=f"default {DEFAULT_OUT}, _cuda / _tiny added")
    parser.add_argument("--worker", nargs=4, metavar=("KIND", "FOLDER", "TEMPLATE", "OUT"))
    args = parser.parse_args()
    tiny = args.size == "tiny"
    args.prompts = args.prompts or (8 if tiny else 4)
    args.rounds = args.rounds or (5 if tiny else 2)
    if not 1 <= args.prompts <= len(COUNTRIES) or args.rounds < 1:
        parser.error(f"--prompts must be 1 to {len(COUNTRIES)} and --rounds at least 1")
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    if args.worker:
        kind, folder, template, out = args.worker
        peer_worker(kind, folder, template, args, out)
        return
    on_gpu = torch.device(args.device).type == "cuda"
    suffix = ("_cuda" if on_gpu else "") + ("_tiny" if tiny else "")
    out = args.out or DEFAULT_OUT.with_stem(DEFAULT_OUT.stem + suffix)
    if args.peer_python is None:
        from overlay_venv import overlay_venv

        python = overlay_venv(PEER_VENV, PEER_PACKAGES)
    else:
        python = args.peer_python
    rows = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        shapes = {kind: save_model(kind, args.size, Path(tmp) / kind) for kind in NAMES}
        for name, (kind, template) in CASES.items():
            print(f"{name} ...", flush=True)
            row = compare(python, kind, Path(tmp) / kind, template, args)
            model = f"{NAMES[kind][0]} shape, random weights, {NAMES[kind][1]}"
            rows.append({"case": name, "model": model, "shape": shapes[kind], **row})
    result: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, torch threads 1",
        "device": torch.cuda.get_device_name(args.device) if on_gpu else "cpu",
        "torch": torch.__version__,
        "size": args.size,
        "steps": STEPS,
        "adaptlab_rule": "adaptive (Gauss-Lobatto, tolerance 1e-2)",
        "reference": f"composite Gauss-Legendre, {REFERENCE[0]} intervals x {REFERENCE[1]} nodes",
        "prompts": args.prompts,
        "rounds": args.rounds,
        "wall_s": time.perf_counter() - started,
        "rows": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print_table(result, out)


def print_table(result: dict[str, Any], out: Path) -> None:
    print(
        f"{'case':<16}{'shape':>20}{'tokens':>7}{'adaptlab s':>12}{'peer s':>9}{'speed-up':>10}"
        f"{'(CPU)':>8}{'adaptlab err':>14}{'peer err':>10}{'riemann20 s':>13}{'its err':>10}"
    )
    for row in result["rows"]:
        shape = row["shape"]
        text = f"{shape['layers']}/{shape['hidden']}/{shape['ffn']}/{shape['vocabulary']}"
        print(
            f"{row['case']:<16}{text:>20}{row['tokens']:>7}{row['adaptlab_s_per_prompt']:>12.3f}"
            f"{row['knowledge_neurons_s_per_prompt']:>9.2f}{row['speedup']:>9.1f}x"
            f"{row['speedup_cpu']:>7.1f}x"
            f"{row['adaptlab_error_max']:>14.1e}{row['knowledge_neurons_error_max']:>10.1e}"
            f"{row['adaptlab_riemann20_s_per_prompt']:>13.3f}"
            f"{row['adaptlab_riemann20_error_max']:>10.1e}"
        )
    print(
        f"(wall seconds per prompt on {result['device']}, median of {result['rounds']} rounds of "
        f"{result['prompts']} prompts; (CPU): the speed-up in CPU seconds; errors: largest over "
        "the prompts of ||S - R|| / ||R|| against each side's reference R; riemann20: adaptlab "
        "with the slides' m = 20 sum; shape: layers/hidden/FFN/vocabulary)"
    )
    print(f"wrote {out}")
    if result["rows"][0]["adaptlab_phase_shares"] is not None:
        print(f"\nadaptlab's time by phase (profiled rounds)\n{'case':<16}", end="")
        print("".join(f"{name:>10}" for name in (*PHASES, "other")))
        for row in result["rows"]:
            shares = row["adaptlab_phase_shares"].values()
            print(f"{row['case']:<16}" + "".join(f"{share:>10.0%}" for share in shares))


if __name__ == "__main__":
    main()

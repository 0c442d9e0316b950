"""Knowledge-neuron attribution per prompt: adaptlab against `knowledge-neurons`, time and error.

Models, saved to a temporary folder that both sides load (random weights, seed 0):

- `--size base` (the default), the shapes of the knowledge-neuron slides: a BERT-base masked
  LM (12 layers, hidden 768, FFN 3,072, 12 heads) over the real MiniLM word-piece vocabulary
  (30,522 pieces), and a GPT-Neo-125M causal LM (12 layers, 768, 3,072, 12 heads, global and
  local attention alternating) over the real SmolLM2 vocabulary (49,152); knowledge-neurons
  knows BERT, GPT-2 and GPT-Neo, adaptlab's backbone discovery GPT-Neo, not GPT-2's Conv1D;
- `--size tiny`: the same architectures with 4 layers, hidden 64, FFN 256, 4 heads (a quick
  check; there the vocabulary-sized LM head is most of the work);
- `--size real`: the built-in SmolLM2-135M with its trained weights (30 layers, 576, 1,536,
  Llama), adaptlab alone (knowledge-neurons has no Llama): how accurate each quadrature is
  where the integrand is not as smooth as a random model's.

Prompts: `--prompts` countries with one-token capitals (4 by default, 8 tiny, 2 real) in a short
template (9 tokens with BERT's [CLS] and [SEP], 5 for a causal model) and a long one (21 and
17). Both sides compute integrated gradients of P(answer) over every FFN intermediate neuron of
every layer, with one torch thread each, on the CPU or (`--device cuda`) a GPU:

- adaptlab: `adaptlab.knowledge.attribute` with its default, the adaptive quadrature
  (Simpson's rule, then 5-point Gauss-Lobatto, then halves; tolerance 3e-2; all layers in
  one growing batch from one unmodified row, the LM head on the answer position only, a
  causal LM's prompt read once); and, as a second column, the same with the slides' right
  Riemann sum, m = 20 (`rule="riemann"`);
- knowledge-neurons==0.0.2: `KnowledgeNeurons.get_scores(prompt, answer, steps=20,
  batch_size=20)` (one batch per layer, its fastest setting; alpha = linspace(0, 1, 20), each
  weighted 1/20). It runs in an overlay venv, benchmarks/.venv-kn (benchmarks/overlay_venv.py:
  the package and einops; torch and transformers come from .venv), in a subprocess that times
  itself, so process start-up is not counted (started with `python -P`, so this script's
  folder does not shadow the `knowledge_neurons` package). `--peer-python` names another
  interpreter that imports knowledge_neurons instead of the overlay.

Times: median seconds per prompt over `--rounds` rounds (2, 5 tiny; each round attributes
every prompt once, after one untimed warm-up prompt; scores are copied to the CPU inside the
timed loop), in wall-clock and in CPU seconds of the process (one thread each, so the CPU
figure shows the work done when other jobs share the machine). On the CPU as many more rounds
of adaptlab's default run under torch.profiler, which reports each phase's share of its time
(a causal LM's prompt cache, the batches' forward passes, the closed-form LM head, the
backward passes).

Error: for every prompt, each side's scores S against a converged reference R of the integral
that side computes, ||S - R|| / ||R|| over all layers and neurons. The reference is computed
once per prompt, outside both libraries, in the plainest way: per layer, a hook on the
neurons' module replaces the answer position's activations by α w̄ in a batch of 16 nodes,
the model runs (a causal model reads the tokens before the answer position once, into a
key/value cache), P(answer) is the softmax at the answer position and autograd gives dP/dw.
The nodes are 8-node Gauss-Legendre rules (exact to degree 15) on sub-intervals, starting
from the halves of [0, 1]: each interval is compared with the sum over its two halves, which
are halved again until the two agree to 1e-5 of the layer's norm per unit of width, where a
trained model switches P abruptly (at most 7 times); the summed disagreements, over the
reference's norm, estimate its error (`reference_check` in the JSON; cautious, since they
measure the coarser level). (A right Riemann sum with m = 512 would not do: its error, of
order 1/(2m) = 1e-3, is larger than what it measures.)
For BERT both sides attribute the same neurons, the output of the FFN's activation, so one
reference serves both. For GPT-Neo knowledge-neurons patches the output of `mlp.c_fc`, the
FFN's input projection *before* its activation, while adaptlab (and the paper) attribute the
activation's output, the input of `mlp.c_proj`: each side is measured against the reference
of its own integral.

Usage: ``.venv/bin/python benchmarks/knowledge_neurons.py [--size tiny|real] [--device cuda]``.
"""

from __future__ import annotations

import argparse
import copy
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
TEMPLATES = {
    "short": {"bert": "The capital of [X] is [Y].", "causal": "The capital of [X] is [Y]"},
    "long": {"bert": LONG + ".", "causal": LONG},
}
"""Per length, the template of a masked and of a causal model (which ends with [Y])."""
PHASES = ("prompt", "forward", "head", "backward")
"""adaptlab's profiler labels (adaptlab.knowledge.attribution.PHASE)."""
SIZES = {
    "base": {"layers": 12, "hidden": 768, "ffn": 3072, "heads": 12},
    "tiny": {"layers": 4, "hidden": 64, "ffn": 256, "heads": 4},
}
"""Shapes of the random models."""
NAMES = {
    "bert": ("bert", "BERT-base", "BERT masked LM, MiniLM vocabulary, random weights"),
    "gpt": ("gpt-neo", "GPT-Neo-125M", "GPT-Neo causal LM, SmolLM2 vocabulary, random weights"),
    "llama": ("smollm2", "SmolLM2-135M", "the built-in smollm2-135m, trained weights"),
}
"""kind -> (case prefix, shape named after, what the model is)."""
REAL_MODEL = "smollm2-135m"
REFERENCE_TOLERANCE = 1e-5
REFERENCE_DEPTH = 7
"""The reference's intervals are halved until two levels agree to this share of the layer's
norm per unit of width, at most this many times (to 1/256)."""
SITES = {
    ("bert", "ours"): ("bert.encoder.layer.{}.intermediate", "output"),
    ("bert", "peer"): ("bert.encoder.layer.{}.intermediate", "output"),
    ("gpt", "ours"): ("transformer.h.{}.mlp.act", "output"),
    ("gpt", "peer"): ("transformer.h.{}.mlp.c_fc", "output"),
    ("llama", "ours"): ("model.layers.{}.mlp.down_proj", "input"),
}
"""The module (per layer) whose output or input each side's neurons are."""


def prompts(kind: str, template: str, count: int) -> list[tuple[str, str, str]]:
    """(peer prompt, subject, answer) per country: BERT's prompt holds [MASK] and its answer is
    the lower-case word piece; a causal prompt stops before [Y] and its answer has its space."""
    chosen = list(COUNTRIES.items())[:count]
    if kind == "bert":  # the masked model
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
    kind: str, source: str, template: str, args: argparse.Namespace, rule: str
) -> tuple[list[float], list[float], list[torch.Tensor], dict[str, float] | None]:
    """adaptlab with quadrature `rule`: wall and CPU seconds per prompt per round, the scores of
    the last round, and on the CPU for the default rule each phase's share in as many profiled
    rounds."""
    from adaptlab.knowledge import attribute, load_lm

    lm = load_lm(source, device=args.device)
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


class _Reader:
    """P(answer) of one prompt with one layer's neurons (the site module's input or output at
    the answer position) replaced by given values, one row per value. A causal model reads
    the tokens before the answer position once, into a key/value cache."""

    def __init__(self, model: Any, causal: bool, ids: torch.Tensor, position: int) -> None:
        self.model, self.past = model, None
        self.ids, self.position = ids, position
        if causal and position > 0:
            with torch.no_grad():
                self.past = model(input_ids=ids[:, :position], use_cache=True).past_key_values
            self.ids, self.position = ids[:, position:], 0

    def logits(self, rows: int) -> torch.Tensor:
        ids = self.ids.expand(rows, -1)
        if self.past is None:
            return self.model(input_ids=ids).logits[:, self.position]
        past = copy.deepcopy(self.past)
        past.batch_repeat_interleave(rows)
        mask = torch.ones(rows, past.get_seq_length() + 1, dtype=torch.long)
        out = self.model(input_ids=ids, past_key_values=past, attention_mask=mask, use_cache=True)
        return out.logits[:, self.position]

    def hook(self, site: tuple[str, str], layer: int, change: Callable[[torch.Tensor], Any]) -> Any:
        """`change` sees the site's (rows, positions, neurons) tensor; a tensor it returns
        replaces it."""
        module: nn.Module = self.model.get_submodule(site[0].format(layer))
        if site[1] == "output":
            return module.register_forward_hook(lambda _, __, out: change(out))

        def pre(_: nn.Module, args: tuple[Any, ...]) -> Any:
            new = change(args[0])
            return None if new is None else (new, *args[1:])

        return module.register_forward_pre_hook(pre)


def reference_scores(
    reader: _Reader, layers: int, site: tuple[str, str], target: int
) -> tuple[torch.Tensor, float]:
    """(layers, neurons) ∫_0^1 w̄ dP(α w̄)/dw dα, and an estimate of its error (a norm).

    Per layer, 8-node Gauss-Legendre on [0, 1/2] and [1/2, 1]; each interval is compared with
    the sum over its two halves and halved again until they agree to `REFERENCE_TOLERANCE`
    of the layer's norm per unit of width (at most `REFERENCE_DEPTH` times). The accepted
    halves are the reference; the differences, summed, the estimate of its error (of the
    coarser level, so cautious).
    """
    scores, errors = [], []
    for layer in range(layers):
        seen: list[torch.Tensor] = []
        handle = reader.hook(site, layer, _keeping(reader.position, seen))
        with torch.no_grad():
            reader.logits(1)
        handle.remove()
        part = _Layer(reader, site, layer, target, seen[0])
        current = [(0.0, 0.5), (0.5, 1.0)]
        values = part.integrals(current)
        scale = torch.stack(values).sum(0).norm().item()
        total, error = torch.zeros_like(values[0]), 0.0
        for depth in range(REFERENCE_DEPTH + 1):
            halves = [h for a, b in current for h in ((a, (a + b) / 2), ((a + b) / 2, b))]
            parts = part.integrals(halves)
            still, still_values = [], []
            for k, (a, b) in enumerate(current):
                finer = parts[2 * k] + parts[2 * k + 1]
                gap = (finer - values[k]).norm().item()
                if gap <= REFERENCE_TOLERANCE * scale * (b - a) or depth == REFERENCE_DEPTH:
                    total, error = total + finer, error + gap
                else:
                    still += halves[2 * k : 2 * k + 2]
                    still_values += parts[2 * k : 2 * k + 2]
            current, values = still, still_values
            if not current:
                break
        scores.append(total)
        errors.append(error)
    return torch.stack(scores), float(torch.tensor(errors).norm())


class _Layer:
    """One layer's w̄ ∫ dP/dw over intervals, by 8-node Gauss-Legendre, 16 nodes a batch."""

    def __init__(
        self, reader: _Reader, site: tuple[str, str], layer: int, target: int, w: torch.Tensor
    ) -> None:
        import numpy as np

        self.reader, self.site, self.layer, self.target, self.activation = (
            reader, site, layer, target, w,
        )  # fmt: skip
        nodes, weights = np.polynomial.legendre.leggauss(8)
        self.nodes = torch.tensor((nodes + 1) / 2, dtype=torch.float64)
        self.weights = torch.tensor(weights / 2, dtype=torch.float64)

    def integrals(self, intervals: list[tuple[float, float]]) -> list[torch.Tensor]:
        alphas = torch.cat([a + (b - a) * self.nodes for a, b in intervals])
        grads = []
        for chunk in alphas.split(16):
            scaled = (chunk[:, None].float() * self.activation).requires_grad_(True)
            handle = self.reader.hook(
                self.site, self.layer, _replacing(self.reader.position, scaled)
            )
            probability = self.reader.logits(len(chunk)).softmax(-1)[:, self.target]
            handle.remove()
            grads.append(torch.autograd.grad(probability.sum(), scaled)[0].double())
        per_node = torch.cat(grads).view(len(intervals), len(self.nodes), -1)
        widths = torch.tensor([b - a for a, b in intervals], dtype=torch.float64)
        sums = torch.einsum("k,ikn->in", self.weights, per_node) * widths[:, None]
        return list(self.activation.double() * sums)


def _keeping(position: int, seen: list[torch.Tensor]) -> Callable[[torch.Tensor], None]:
    """Appends row 0 of the site's tensor at `position` to `seen`."""

    def keep(x: torch.Tensor) -> None:
        seen.append(x[0, position].detach())

    return keep


def _replacing(position: int, values: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """The site's tensor with `values` (one per row) at `position`."""

    def replace(x: torch.Tensor) -> torch.Tensor:
        x = x.clone()
        x[:, position] = values
        return x

    return replace


def references(
    kind: str, source: str, template: str, args: argparse.Namespace, side: str
) -> tuple[list[torch.Tensor], float]:
    """The reference scores of each prompt for `side` (ours or peer), and the largest over the
    prompts of the reference's estimated error over its norm."""
    from adaptlab.knowledge import load_lm
    from adaptlab.knowledge.prompts import token_queries

    lm = load_lm(source)  # for the token queries and the model as a user loads it
    model = lm.model.requires_grad_(False)
    found, checks = [], []
    for _, subject, answer in prompts(kind, template, args.prompts):
        (query,) = token_queries(lm, template, subject, answer)
        reader = _Reader(model, lm.kind == "causal", query.input_ids[None], query.position)
        scores, error = reference_scores(reader, lm.num_layers, SITES[kind, side], query.target)
        found.append(scores)
        checks.append(error / scores.norm().item())
    return found, max(checks)


def relative_error(found: torch.Tensor, reference: torch.Tensor) -> float:
    return float((found.double() - reference).norm() / reference.norm())


def compare(
    python: Path | None, kind: str, source: str, template: str, args: argparse.Namespace
) -> dict[str, Any]:
    """Both sides (adaptlab only where `python` is None) on the prompts of one template: times,
    speed-up, errors against the reference."""
    ours_times, ours_cpu, ours_scores, phases = time_ours(kind, source, template, args, "adaptive")
    riemann_times, riemann_cpu, riemann_scores, _ = time_ours(
        kind, source, template, args, "riemann"
    )
    ours_reference, ours_check = references(kind, source, template, args, "ours")

    def errors(scores: list[torch.Tensor], reference: list[torch.Tensor]) -> list[float]:
        return [relative_error(s, r) for s, r in zip(scores, reference, strict=True)]

    ours_errors = errors(ours_scores, ours_reference)
    riemann_errors = errors(riemann_scores, ours_reference)
    row: dict[str, Any] = {
        "template": template,
        "tokens": len(prompt_ids(kind, source, template)),
        "prompts": len(ours_scores),
        "adaptlab_s_per_prompt": statistics.median(ours_times),
        "adaptlab_cpu_s_per_prompt": statistics.median(ours_cpu),
        "adaptlab_riemann20_s_per_prompt": statistics.median(riemann_times),
        "adaptlab_riemann20_cpu_s_per_prompt": statistics.median(riemann_cpu),
        "adaptlab_error_max": max(ours_errors),
        "adaptlab_riemann20_error_max": max(riemann_errors),
        "adaptlab_errors": ours_errors,
        "adaptlab_riemann20_errors": riemann_errors,
        "reference_check": {"adaptlab": ours_check},
        "adaptlab_phase_shares": phases,
        "adaptlab_times": ours_times,
        "adaptlab_riemann20_times": riemann_times,
        "adaptlab_cpu_times": ours_cpu,
        "adaptlab_riemann20_cpu_times": riemann_cpu,
    }
    if python is None:
        return row
    from safetensors.torch import load_file

    peer_out = Path(source).parent / "peer.safetensors"
    worker = [str(python), "-P", __file__, "--prompts", str(args.prompts)]
    worker += ["--rounds", str(args.rounds), "--device", args.device]
    subprocess.run([*worker, "--worker", kind, source, template, str(peer_out)], check=True)
    peer_loaded = load_file(str(peer_out))
    peer_scores = [peer_loaded[f"p{i}"] for i in range(len(ours_scores))]
    peer_timing = json.loads(peer_out.with_suffix(".json").read_text())
    peer_times, peer_cpu = peer_timing["times"], peer_timing["cpu_times"]
    same_neurons = SITES[kind, "ours"] == SITES[kind, "peer"]
    if same_neurons:
        peer_reference, peer_check = ours_reference, ours_check
    else:
        peer_reference, peer_check = references(kind, source, template, args, "peer")
    peer_errors = errors(peer_scores, peer_reference)
    peer_s, peer_cpu_s = statistics.median(peer_times), statistics.median(peer_cpu)
    return {
        **row,
        "knowledge_neurons_s_per_prompt": peer_s,
        "speedup": peer_s / row["adaptlab_s_per_prompt"],
        "knowledge_neurons_cpu_s_per_prompt": peer_cpu_s,
        "speedup_cpu": peer_cpu_s / row["adaptlab_cpu_s_per_prompt"],
        "knowledge_neurons_error_max": max(peer_errors),
        "knowledge_neurons_errors": peer_errors,
        "reference_check": {"adaptlab": ours_check, "knowledge_neurons": peer_check},
        "same_neurons": same_neurons,
        "knowledge_neurons_times": peer_times,
        "knowledge_neurons_cpu_times": peer_cpu,
    }


def prompt_ids(kind: str, source: str, template: str) -> list[int]:
    """The tokens the model reads for the first prompt (what the peer reads, too)."""
    from adaptlab.models import load_tokenizer

    return list(load_tokenizer(source)(prompts(kind, template, 1)[0][0])["input_ids"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=[*SIZES, "real"], default="base")
    parser.add_argument("--prompts", type=int, help="countries per case (4; 8 tiny, 2 real)")
    parser.add_argument("--rounds", type=int, help="timed rounds (2 base, 5 tiny)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (both sides)")
    parser.add_argument("--peer-python", type=Path, help="an interpreter with knowledge_neurons")
    parser.add_argument("--out", type=Path, help=f"default {DEFAULT_OUT}, _cuda / _tiny added")
    parser.add_argument("--worker", nargs=4, metavar=("KIND", "FOLDER", "TEMPLATE", "OUT"))
    args = parser.parse_args()
    tiny, real = args.size == "tiny", args.size == "real"
    args.prompts = args.prompts or (8 if tiny else 2 if real else 4)
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
    suffix = ("_cuda" if on_gpu else "") + ("" if args.size == "base" else f"_{args.size}")
    out = args.out or DEFAULT_OUT.with_stem(DEFAULT_OUT.stem + suffix)
    python = None
    if real:
        pass  # knowledge-neurons knows BERT, GPT-2 and GPT-Neo, not Llama
    elif args.peer_python is None:
        from overlay_venv import overlay_venv

        python = overlay_venv(PEER_VENV, PEER_PACKAGES)
    else:
        python = args.peer_python
    from adaptlab.knowledge.quadrature import DEFAULT_TOLERANCE

    result: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, torch threads 1",
        "device": torch.cuda.get_device_name(args.device) if on_gpu else "cpu",
        "torch": torch.__version__,
        "size": args.size,
        "steps": STEPS,
        "adaptlab_rule": f"adaptive (Simpson, Lobatto-5, halves; tolerance {DEFAULT_TOLERANCE:g})",
        "reference": (
            "8-node Gauss-Legendre on halves of [0, 1], each halved until two levels agree to "
            f"{REFERENCE_TOLERANCE:g} of the layer's norm per unit width (at most "
            f"{REFERENCE_DEPTH} times)"
        ),
        "prompts": args.prompts,
        "rounds": args.rounds,
        "complete": False,
        "wall_s": 0.0,
        "rows": [],
    }
    rows: list[dict[str, Any]] = result["rows"]
    started = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        sources = {"llama": REAL_MODEL} if real else {"bert": f"{tmp}/bert", "gpt": f"{tmp}/gpt"}
        shapes = {
            kind: real_shape() if real else save_model(kind, args.size, Path(source))
            for kind, source in sources.items()
        }
        for kind, source in sources.items():
            prefix, shape_name, what = NAMES[kind]
            for length, templates in TEMPLATES.items():
                template = templates["bert" if kind == "bert" else "causal"]
                if not rows:
                    print(HEADER, flush=True)
                row = compare(python, kind, source, template, args)
                rows.append(
                    {"case": f"{prefix}, {length}", "model": f"{shape_name} shape: {what}",
                     "shape": shapes[kind], **row}
                )  # fmt: skip
                print_row(rows[-1])
                result["wall_s"] = time.perf_counter() - started
                out.write_text(json.dumps(result, indent=2))  # a stopped run keeps its cases
    result["complete"] = True
    out.write_text(json.dumps(result, indent=2))
    print_table(result, out)


HEADER = (
    f"{'case':<16}{'shape':>20}{'tokens':>7}{'adaptlab s':>12}{'peer s':>9}{'speed-up':>10}"
    f"{'(CPU)':>8}{'adaptlab err':>14}{'peer err':>10}{'riemann20 s':>13}{'its err':>10}"
)


def print_row(row: dict[str, Any]) -> None:
    """One case as a line of the table (the peer's columns n/a where it did not run)."""
    shape = row["shape"]
    text = f"{shape['layers']}/{shape['hidden']}/{shape['ffn']}/{shape['vocabulary']}"
    peer = "speedup" in row
    print(
        f"{row['case']:<16}{text:>20}{row['tokens']:>7}{row['adaptlab_s_per_prompt']:>12.3f}"
        + (
            f"{row['knowledge_neurons_s_per_prompt']:>9.2f}{row['speedup']:>9.1f}x"
            f"{row['speedup_cpu']:>7.1f}x"
            if peer
            else f"{'n/a':>9}{'n/a':>10}{'n/a':>8}"
        )
        + f"{row['adaptlab_error_max']:>14.1e}"
        + (f"{row['knowledge_neurons_error_max']:>10.1e}" if peer else f"{'n/a':>10}")
        + f"{row['adaptlab_riemann20_s_per_prompt']:>13.3f}"
        f"{row['adaptlab_riemann20_error_max']:>10.1e}",
        flush=True,
    )


def print_table(result: dict[str, Any], out: Path) -> None:
    print(HEADER)
    for row in result["rows"]:
        print_row(row)
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


def real_shape() -> dict[str, int]:
    """The built-in SmolLM2's shape, read from its config."""
    import transformers as T

    from adaptlab.models import builtin_model_folder

    config = T.AutoConfig.from_pretrained(builtin_model_folder(REAL_MODEL))
    return {
        "layers": config.num_hidden_layers,
        "hidden": config.hidden_size,
        "ffn": config.intermediate_size,
        "heads": config.num_attention_heads,
        "vocabulary": config.vocab_size,
    }


if __name__ == "__main__":
    main()

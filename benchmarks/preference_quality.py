"""Does preference tuning add to supervised fine-tuning? SmolLM2-135M-Instruct (`smollm2-135m`),
LoRA, countries-qa, per seed:

- `sft`: SFT on countries-qa's questions (`--task sft`);
- `sft+dpo`: a DPO adapter stacked on the SFT one, on countries-qa-pairs (the right answer
  against another country's answer to the same relation), the SFT adapter its reference;
- `sft+chosen`: the control with the same extra training on the chosen answers alone, an SFT
  adapter stacked on the SFT one, on the same questions and answers;
- `sft+dpo-own`: DPO on pairs whose rejected answer is the SFT model's own wrong answer to a
  training question (`own_answer_pairs`, as `adaptlab data pairs` makes them), the on-policy
  pairs DPO is meant for;
- `sft+grpo`: GRPO stacked on the SFT adapter, on countries-qa-questions (`--grpo-train-size`
  questions, `--generations` samples each, rewarded by exact match of the answer).

Every arm is scored alike on the held-out countries (the test split: no test country is seen
in training): exact match of the greedy answer, and on the test pairs the share whose chosen
answer has the higher log-probability (`logp_accuracy`) and the reward accuracy against the
base model (beta times the log-ratio to the base, beta 0.1: what DPO's implicit reward would say
with the base as the reference; the same reference for every arm).

Usage (from the repository root; `--train-size` and `--epochs` shrink it to fit; `--only`
trains and scores some arms, the others kept from an earlier call)::

    flock /tmp/adaptlab-bench.lock .venv/bin/python benchmarks/preference_quality.py \\
        --seeds 0 1 2 --train-size 512 --out runs/preference-quality

Each run and its scores (`quality.json`) are kept in its folder under `--out`, so a call
resumes where one stopped. Writes `benchmarks/results/preference_quality.json` and prints the
table (mean and spread over seeds).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import torch

from adaptlab.data.generative import sample_corpus
from adaptlab.data.preference import Preference, Question
from adaptlab.data.preference_loading import load_preferences
from adaptlab.data.preference_writing import write_preferences
from adaptlab.engine.restore import load_trained
from adaptlab.methods.adapt import disabled
from adaptlab.records.config import TrainConfig
from adaptlab.records.spec import RunSpec
from adaptlab.runs.generative_evaluation import Generation, score_split
from adaptlab.runs.own_pairs import own_answer_pairs
from adaptlab.runs.preference_data import Reading, encode_preferences
from adaptlab.runs.preference_objective import collate_pairs, pair_logps
from adaptlab.runs.run import execute
from adaptlab.tasks.generation_metrics import GENERATION_METRICS
from adaptlab.tasks.preference_settings import PreferenceSettings
from adaptlab.tasks.registry import LABELLED, get_task

MODEL = "smollm2-135m"
PAIRS = "countries-qa-pairs"
QUESTIONS = "countries-qa-questions"
ARMS = ("sft", "sft+dpo", "sft+chosen", "sft+dpo-own", "sft+grpo")
BETA = 0.1
RESULTS = Path(__file__).parent / "results" / "preference_quality.json"


def train(
    out: Path,
    data: str,
    task: str,
    seed: int,
    args: argparse.Namespace,
    *,
    sampled: bool = True,
    **extra: Any,
) -> Path:
    """One run, kept if already done (its metrics.json written); `sampled`: its training data
    sampled to `--train-size` (the own-answer pairs are all kept)."""
    if (out / "metrics.json").is_file():
        return out
    lr = {"dpo": args.dpo_lr, "grpo": args.grpo_lr}.get(task, args.sft_lr)
    config = TrainConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=lr,
        max_length=64,
        eval_batch_size=64,
        seed=seed,
    )
    options: dict[str, Any] = {"task": task, "max_new_tokens": 12}
    if task == "dpo":
        options["beta"] = BETA
    if task == "grpo":  # exact match of the sampled answer; 12 tokens, each line an answer
        options.update(reward="exact", num_generations=args.generations, stop=["\n"])
    spec = RunSpec.build(
        MODEL,
        data,
        "lora",
        train_size=None
        if not sampled
        else args.grpo_train_size
        if task == "grpo"
        else args.train_size,
        test_size=args.test_size,
        train=config,
        data_options=options,
        device="cpu",
        **extra,
    )
    execute(spec, out, progress=False, overwrite=True)
    return out


def own_pairs(sft: Path, seed: int, args: argparse.Namespace, folder: Path) -> Path:
    """Training pairs whose rejected answer is the SFT model's own wrong answer, as JSONL, with
    the dev and test pairs of countries-qa-pairs (the held-out ones every arm is scored on)."""
    if (folder / "train.jsonl").is_file():
        return folder
    loaded, _ = load_trained(sft, "cpu")
    corpus_questions = _train_questions(_scoring_spec(seed, args))
    pairs = own_answer_pairs(
        loaded.model.eval(),
        loaded.tokenizer,
        corpus_questions,
        max_length=64,
        chat_template=None,
        max_new_tokens=12,
        stop=("\n",),
        batch_size=64,
    )
    folder.mkdir(parents=True, exist_ok=True)
    write_preferences(folder / "train.jsonl", pairs)
    held = load_preferences(PAIRS, LABELLED, shape="preference")
    for split in ("dev", "test"):
        write_preferences(
            folder / f"{split}.jsonl", [p for p in held.splits[split] if isinstance(p, Preference)]
        )
    print(
        f"seed {seed}: {len(pairs)} of {len(corpus_questions)} training answers wrong", flush=True
    )
    return folder


def score(run: Path, seed: int, args: argparse.Namespace) -> dict[str, float]:
    """The arm's scores on the held-out test split (see the module docstring)."""
    loaded, _ = load_trained(run, "cpu")
    model, tokenizer = loaded.model.eval(), loaded.tokenizer
    spec = _scoring_spec(seed, args)
    data = encode_preferences(PAIRS, get_task("dpo"), _settings(), tokenizer, Reading.of_run(spec))
    test = data.splits["test"]
    generation = Generation(GENERATION_METRICS, 12, ("\n",))
    answered = score_split(model, tokenizer, test.chosen, generation, 64)
    right = reward_right = 0
    with torch.no_grad():
        for start in range(0, len(test.pairs), 64):
            batch = collate_pairs(test.pairs[start : start + 64], tokenizer.pad_token_id)
            policy = pair_logps(model, batch)
            with disabled(model) as base_model:
                base = pair_logps(base_model, batch)
            right += int((policy.chosen > policy.rejected).sum())
            chosen = BETA * (policy.chosen - base.chosen)
            rejected = BETA * (policy.rejected - base.rejected)
            reward_right += int((chosen > rejected).sum())
    count = len(test.pairs)
    return {
        "exact_match": answered.metrics["exact_match"],
        "logp_accuracy": right / count,
        "reward_accuracy_vs_base": reward_right / count,
        "test_pairs": count,
    }


def _settings() -> PreferenceSettings:
    return PreferenceSettings.of({"task": "dpo", "max_new_tokens": 12}, get_task("dpo"))


def _scoring_spec(seed: int, args: argparse.Namespace) -> RunSpec:
    return RunSpec.build(
        MODEL,
        PAIRS,
        "lora",
        train_size=args.train_size,
        test_size=args.test_size,
        train=TrainConfig(max_length=64, seed=seed),
        data_options={"task": "dpo"},
        device="cpu",
    )


def _train_questions(spec: RunSpec) -> list[Question]:
    """The training questions of countries-qa-pairs as the run samples them, with answers."""
    corpus = load_preferences(PAIRS, LABELLED, shape="preference")
    if spec.train_size is not None:
        corpus = sample_corpus(corpus, spec.train_size, spec.train.seed)
    return [
        Question(p.prompt, p.chosen) for p in corpus.splits["train"] if isinstance(p, Preference)
    ]


def arms_of(seed: int, args: argparse.Namespace) -> dict[str, Path]:
    """Each arm's run folder for `seed`, trained where it is not yet (the `--only` arms and
    the SFT run they build on)."""
    root = args.out / f"seed{seed}"
    sft = train(root / "sft", "countries-qa", "sft", seed, args)
    on_sft = {"stack": (str(sft),)}
    build = {
        "sft": lambda: sft,
        "sft+dpo": lambda: train(root / "dpo", PAIRS, "dpo", seed, args, **on_sft),
        "sft+chosen": lambda: train(root / "chosen", "countries-qa", "sft", seed, args, **on_sft),
        "sft+dpo-own": lambda: train(
            root / "dpo-own",
            str(own_pairs(sft, seed, args, root / "own-pairs")),
            "dpo",
            seed,
            args,
            sampled=False,
            **on_sft,
        ),
        "sft+grpo": lambda: train(root / "grpo", QUESTIONS, "grpo", seed, args, **on_sft),
    }
    return {arm: build[arm]() for arm in args.only}


def scored(run: Path, seed: int, args: argparse.Namespace) -> dict[str, float]:
    """The arm's scores, kept in its run folder once computed."""
    kept = run / "quality.json"
    if kept.is_file():
        return dict(json.loads(kept.read_text()))
    scores = score(run, seed, args)
    kept.write_text(json.dumps(scores) + "\n")
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--train-size", type=int, default=512)
    parser.add_argument("--grpo-train-size", type=int, default=128)
    parser.add_argument("--test-size", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--sft-lr", type=float, default=2e-3)
    parser.add_argument("--dpo-lr", type=float, default=1e-4)
    parser.add_argument("--grpo-lr", type=float, default=1e-4)
    parser.add_argument("--generations", type=int, default=4, help="GRPO's samples a question.")
    parser.add_argument("--only", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--out", type=Path, default=Path("runs/preference-quality"))
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    table: dict[str, list[dict[str, float]]] = {}
    for seed in args.seeds:
        for arm, run in arms_of(seed, args).items():
            scores = scored(run, seed, args)
            table.setdefault(arm, []).append(scores)
            print(f"seed {seed} {arm}: {scores}", flush=True)
    summary = {
        arm: {
            key: {
                "mean": statistics.fmean(r[key] for r in rows),
                "stdev": statistics.stdev(r[key] for r in rows) if len(rows) > 1 else 0.0,
                "seeds": [r[key] for r in rows],
            }
            for key in ("exact_match", "logp_accuracy", "reward_accuracy_vs_base")
        }
        for arm, rows in table.items()
    }
    print(f"{'arm':<14} {'exact match':>16} {'logp acc':>16} {'reward acc (base)':>18}")
    for arm, scores in summary.items():
        cells = [f"{scores[k]['mean']:.3f} ± {scores[k]['stdev']:.3f}" for k in scores]
        print(f"{arm:<14} {cells[0]:>16} {cells[1]:>16} {cells[2]:>18}")
    results: Path = args.results
    results.parent.mkdir(parents=True, exist_ok=True)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    before = json.loads(results.read_text())["arms"] if results.is_file() else {}
    arms = {**before, **summary}  # arms scored by an earlier call with other --only are kept
    results.write_text(json.dumps({"settings": settings, "arms": arms}, indent=2) + "\n")


if __name__ == "__main__":
    main()

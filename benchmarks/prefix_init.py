"""How far prefix tuning (and the MAM adapter) is from the base model at initialisation.

Prefix tuning cannot start as an exact identity: every query attends to the l prefix
vectors too, so each head's output is (1 - λ) Attn(...) + λ softmax(q P_k^T) P_v (He et al.
2022, eq. 7), λ the attention mass on the prefix. This measures, on MiniLM-L6 and 64 Rotten
Tomatoes test reviews (max 128 tokens), for each method at its defaults and seed 0:

- λ: the mean attention mass on the prefix, over heads, real query tokens and layers (eager
  attention, which returns its weights);
- the relative change of the last hidden states, ||H' - H|| / ||H|| over real tokens;
- the largest change of a class probability under the (fresh, seeded) head.

Usage (from the repository root)::

    .venv/bin/python benchmarks/prefix_init.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch

import adaptlab
from adaptlab.data import load_dataset
from adaptlab.models.loading import load_model
from adaptlab.tasks.registry import LABELLED

OUT = Path(__file__).resolve().parent / "results" / "prefix_init.json"
METHODS = [("prefix", {}), ("prefix", {"length": 10}), ("mam", {})]


def measure(method: str, options: dict[str, Any], texts: list[str]) -> dict[str, Any]:
    loaded = load_model("minilm-l6", "single_label", num_labels=2, seed=0)
    model, tokenizer = loaded.model.eval(), loaded.tokenizer
    model.config._attn_implementation = "eager"
    batch = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
    keep = batch["attention_mask"].bool()
    with torch.no_grad():
        base = model(**batch, output_hidden_states=True)
        handle = adaptlab.adapt(model, method, seed=0, **options)
        length = (
            handle.configs[0].to_dict().get("length")
            or handle.configs[0].to_dict()["prefix_length"]
        )
        adapted = model(**batch, output_hidden_states=True, output_attentions=True)
    mass = torch.stack([a[..., :length].sum(-1) for a in adapted.attentions])  # (L, B, H, T)
    lam = mass.permute(1, 3, 0, 2)[keep].mean().item()
    h, h2 = base.hidden_states[-1][keep], adapted.hidden_states[-1][keep]
    change = ((h2 - h).norm() / h.norm()).item()
    probs = (adapted.logits.softmax(-1) - base.logits.softmax(-1)).abs().max().item()
    return {
        "method": method,
        "options": options,
        "prefix_length": length,
        "prefix_attention_mass": lam,
        "relative_hidden_change": change,
        "max_probability_change": probs,
    }


def main() -> int:
    test = load_dataset("rotten-tomatoes", LABELLED).splits["test"][:64]
    texts = [str(example.text) for example in test]
    rows = [measure(method, options, texts) for method, options in METHODS]
    print(f"{'method':<22} {'l':>4} {'λ (prefix mass)':>16} {'|ΔH|/|H|':>10} {'max Δp':>8}")
    for row in rows:
        label = row["method"] + (f" {row['options']}" if row["options"] else "")
        print(
            f"{label:<22} {row['prefix_length']:>4} {row['prefix_attention_mass']:>16.3f} "
            f"{row['relative_hidden_change']:>10.3f} {row['max_probability_change']:>8.3f}"
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps({"benchmark": "prefix_init", "command": sys.argv, "rows": rows}, indent=1)
    )
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

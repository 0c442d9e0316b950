"""Does the converted multilingual-e5-small put a sentence nearest its translation?

For the English-Slovenian pairs of `tests/fixtures/en-sl-pairs.tsv` (written for the tests),
each sentence is embedded with e5's `query: ` prefix, mean-pooled over its tokens
(`adaptlab.select.features.pool`) and normalised; the table gives, per pair, the cosine of the
translation and of the nearest unrelated sentence of the other language, and per model how
many English sentences find their translation first among the Slovenian ones (and back).
The English-only `minilm-l6` runs beside it, side by side, as the control a multilingual
model must beat (it shares no vocabulary training with Slovenian).

Usage (from the repository root)::

    .venv/bin/python benchmarks/e5_translation_pairs.py    # results/e5_translation_pairs.json
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

import adaptlab
from adaptlab.errors import ModelNotFoundError
from adaptlab.models import load_model
from adaptlab.select.features import pool

BENCH_DIR = Path(__file__).resolve().parent
PAIRS_FILE = BENCH_DIR.parent / "tests" / "fixtures" / "en-sl-pairs.tsv"
DEFAULT_OUT = BENCH_DIR / "results" / "e5_translation_pairs.json"
MODELS = ("multilingual-e5-small", "minilm-l6")
PREFIX = "query: "


def read_pairs(path: Path = PAIRS_FILE) -> list[tuple[str, str]]:
    """(English, Slovenian) sentence pairs, one a line, tab-separated."""
    with path.open(encoding="utf-8", newline="") as file:
        return [(row[0], row[1]) for row in csv.reader(file, delimiter="\t")]


@torch.no_grad()
def embed(model: Any, tokenizer: Any, texts: list[str]) -> torch.Tensor:
    """Normalised mean-pooled last hidden states of `texts`, each with e5's query prefix."""
    batch = tokenizer([PREFIX + t for t in texts], padding=True, return_tensors="pt")
    hidden = model(**batch).last_hidden_state
    pooled = pool(hidden.unsqueeze(0), batch["attention_mask"], "mean")[0]
    return torch.nn.functional.normalize(pooled, dim=-1)


def similarities(name: str, pairs: list[tuple[str, str]]) -> torch.Tensor:
    """English x Slovenian cosine matrix under model `name`."""
    loaded = load_model(name)
    loaded.model.eval()
    english = embed(loaded.model, loaded.tokenizer, [e for e, _ in pairs])
    slovenian = embed(loaded.model, loaded.tokenizer, [s for _, s in pairs])
    return english @ slovenian.T


def summarise(similarity: torch.Tensor) -> dict[str, Any]:
    """Per pair: translation and best unrelated cosine; retrieval both ways."""
    translation = similarity.diagonal()
    unrelated = similarity.masked_fill(torch.eye(len(similarity), dtype=torch.bool), -2.0)
    order = torch.arange(len(similarity))
    others = torch.maximum(unrelated.max(dim=1).values, unrelated.max(dim=0).values)
    return {
        "translation": translation.tolist(),
        "best_unrelated": others.tolist(),
        "english_to_slovenian_top1": int((similarity.argmax(dim=1) == order).sum()),
        "slovenian_to_english_top1": int((similarity.argmax(dim=0) == order).sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    pairs = read_pairs()
    results: dict[str, Any] = {}
    for name in MODELS:
        try:
            results[name] = summarise(similarities(name, pairs))
        except ModelNotFoundError as error:
            print(f"skipping {name}: {error}")
    table = Table(
        title=f"{len(pairs)} English-Slovenian pairs: cosine (translation / nearest unrelated)"
    )
    table.add_column("English")
    for name in results:
        table.add_column(name, justify="right")
    for i, (english, _) in enumerate(pairs):
        cells = [
            f"{r['translation'][i]:.3f} / {r['best_unrelated'][i]:.3f}" for r in results.values()
        ]
        table.add_row(english, *cells)
    n = len(pairs)
    found = [
        f"{r['english_to_slovenian_top1']}/{n}, {r['slovenian_to_english_top1']}/{n}"
        for r in results.values()
    ]
    table.add_row("translation found first (EN→SL, SL→EN)", *found)
    Console().print(table)
    record = {
        "pairs": [{"english": e, "slovenian": s} for e, s in pairs],
        "prefix": PREFIX,
        "models": results,
        "adaptlab": adaptlab.__version__,
        "torch": torch.__version__,
        "machine": platform.machine(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2, ensure_ascii=False))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

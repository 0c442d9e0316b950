"""How numbers read in the report's text, tables and plot labels (plain text, not yet escaped)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from adaptlab.models.resolve import looks_like_path

METRIC_NAMES = {
    "accuracy": "accuracy",
    "macro_f1": "macro-F1",
    "micro_f1": "micro-F1",
    "mcc": "MCC",
    "span_f1": "span F1",
    "span_precision": "span precision",
    "span_recall": "span recall",
    "token_accuracy": "token accuracy",
    "mean_rprecision": "mean R-precision",
    "spearman": "Spearman ρ",
    "pearson": "Pearson r",
    "exact_match": "exact match",
    "token_f1": "token F1",
    "rouge1": "ROUGE-1",
    "rouge2": "ROUGE-2",
    "rougeL": "ROUGE-L",
    "bleu": "BLEU",
    "chrf": "chrF",
}


def metric(name: str) -> str:
    """A metric as people write it: `macro_f1` -> `macro-F1`."""
    return METRIC_NAMES.get(name, name)


def score(value: float) -> str:
    """A metric value: three decimals (metrics are fractions such as accuracy or F1)."""
    return "n/a" if math.isnan(value) else f"{value:.3f}"


def score_pm(mean: float, std: float) -> str:
    """Mean ± standard deviation."""
    return f"{score(mean)} ± {score(std)}"


def rate(value: float | None) -> str:
    """A learning rate the way papers write it: 2e-5, 1e-4, 3.5e-4."""
    if value is None:
        return "default"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def count(value: int) -> str:
    """A parameter count: 110M, 1.2M, 36.9k, 512."""
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{unit}"
    return str(value)


def percent(value: float) -> str:
    """A share of parameters: 100%, 2.31%, 0.081%."""
    if math.isnan(value):
        return "n/a"
    return f"{value:.3g}%"


def times(value: float) -> str:
    """How many times as large: 8x, 2.91x, 120x."""
    return f"{value:.0f}x" if value >= 10 else f"{value:.3g}x"


def names(items: Iterable[str]) -> str:
    """Names in a sentence: `lora`, `lora and ia3`, `lora, ia3 and bitfit`."""
    found = list(items)
    return found[0] if len(found) == 1 else f"{', '.join(found[:-1])} and {found[-1]}"


def seconds(value: float | None) -> str:
    """A duration: 42 s, 3.5 min, 1.2 h."""
    if value is None:
        return "n/a"
    if value < 120:
        return f"{value:.0f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


def p_value(value: float) -> str:
    """A p-value stated in full: `p = 0.031`, or `p < 0.001`."""
    return "p < 0.001" if value < 0.001 else f"p = {value:.3f}"


def candidate(name: str) -> str:
    """A model candidate: a local folder by its last part (`runs/m/minilm-l6-first2` ->
    `minilm-l6-first2`); built-in and hub names (`owner/name`) as they are."""
    return name.rstrip("/").rsplit("/", 1)[-1] if looks_like_path(name) else name

"""The values each metric can take, so that a score read back from a run's record (its
`metrics.json`, a study store's row) that no run could have measured is refused, naming the
file and the field, instead of being drawn in a report or compared as a result.

Fractions (accuracies, F1, exact match, ROUGE) lie in [0, 1]; correlations (Matthews,
Spearman, Pearson) in [-1, 1]; BLEU and chrF from 0 to sacrebleu's 100; a perplexity, the
exponent of a mean cross-entropy, is at least 1; a mean squared error is not negative; a
log-probability is at most 0. Margins, rewards and KL estimates can be any finite number, and
so can a metric not listed here (a plug-in task's). The ranges bound finite scores: a diverged
run's NaN or infinite score reads back as it is, for the report to show as diverged.
"""

from __future__ import annotations

import math

from adaptlab.records.jsonfields import FINITE, NOT_NEGATIVE, Range
from adaptlab.tasks.generation_metrics import METRICS

UNIT: Range = (0.0, 1.0)
_CORRELATION: Range = (-1.0, 1.0)

_FRACTIONS = (
    "accuracy",
    "macro_f1",
    "micro_f1",
    "mean_rprecision",
    "span_f1",
    "span_precision",
    "span_recall",
    "token_accuracy",
    "masked_accuracy",
    "reward_accuracy",
    "pairwise_accuracy",
)
RANGES: dict[str, Range] = {
    **dict.fromkeys(_FRACTIONS, UNIT),
    **dict.fromkeys(("mcc", "spearman", "pearson"), _CORRELATION),
    **{name: (0.0, metric.best) for name, metric in METRICS.items()},
    "perplexity": (1.0, math.inf),
    "mse": NOT_NEGATIVE,
    **dict.fromkeys(("chosen_logps", "rejected_logps"), (-math.inf, 0.0)),
    **dict.fromkeys(("reward_margin", "reward", "train_reward", "kl"), FINITE),
}
"""adaptlab's metrics, each with its range."""


def metric_range(name: str) -> Range:
    """The values metric `name` can take (any finite number for one not listed)."""
    return RANGES.get(name, FINITE)

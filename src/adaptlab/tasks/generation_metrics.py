"""Scores of generated texts against their references; higher is better for every one.

- `exact_match` and `token_f1`: the SQuAD v1.1 answer scores (Rajpurkar et al. 2016, "SQuAD:
  100,000+ Questions for Machine Comprehension of Text", §5), as its official evaluation script
  (`evaluate-v1.1.py`) computes them. Both texts are normalised by that script's
  `normalize_answer`: lower-cased, ASCII punctuation (`string.punctuation`) removed, the words
  "a", "an" and "the" removed, whitespace collapsed. Exact match is 1 when the normalised texts
  are equal; F1 is the harmonic mean of precision and recall of the normalised words, counted
  as multisets, and 0 when no word is shared (so two texts that normalise to nothing match
  exactly but have F1 0, as in that script). Each is the mean over the pairs, from 0 to 1 (the
  script reports them times 100); one reference per prediction.
- `rouge1`, `rouge2`, `rougeL`: ROUGE-1, ROUGE-2 and ROUGE-L (Lin 2004) from the rouge-score
  package's `RougeScorer` with Porter stemming (`use_stemmer=True`): the mean F-measure over
  the pairs, from 0 to 1. Its tokeniser keeps only ASCII letters and digits, so ROUGE is for
  English text (chrF reads any script).
- `bleu` and `chrf`: corpus BLEU (Papineni et al. 2002) and chrF (Popović 2015) from sacrebleu
  with its default settings, from 0 to 100 as sacrebleu reports them.

The scoring packages are imported when a score is asked for, so naming the metrics costs
nothing.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from adaptlab.checks import shown
from adaptlab.data.answer_text import normalize_answer
from adaptlab.errors import ConfigError, DataError

Scorer = Callable[[Sequence[str], Sequence[str]], float]
"""The score of predictions against their references, one reference each."""


@dataclass(frozen=True)
class GenerationMetric:
    """A score of generated texts: its name, its best value (1 or 100), how it is computed."""

    name: str
    best: float
    score: Scorer
    higher_is_better: bool = True


def exact_match(prediction: str, reference: str) -> float:
    """1.0 when the two normalise to the same text, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(reference))


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD v1.1's `f1_score`: F1 of the normalised words as multisets (0 when none is
    shared)."""
    predicted = normalize_answer(prediction).split()
    wanted = normalize_answer(reference).split()
    shared = sum((Counter(predicted) & Counter(wanted)).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / len(predicted), shared / len(wanted)
    return 2 * precision * recall / (precision + recall)


def _mean_of(pair_score: Callable[[str, str], float]) -> Scorer:
    """The mean of `pair_score` over the pairs."""

    def score(predictions: Sequence[str], references: Sequence[str]) -> float:
        pairs = zip(predictions, references, strict=True)
        return sum(pair_score(p, r) for p, r in pairs) / len(predictions)

    return score


def _rouge(kind: str) -> Scorer:
    """The mean F-measure of ROUGE `kind` ("rouge1", "rouge2", "rougeL"), stemmed."""

    def score(predictions: Sequence[str], references: Sequence[str]) -> float:
        from rouge_score.rouge_scorer import RougeScorer

        handlers = list(logging.root.handlers)
        scorer = RougeScorer([kind], use_stemmer=True)
        for added in [h for h in logging.root.handlers if h not in handlers]:
            logging.root.removeHandler(added)  # absl's first log call installs one on the root
        pairs = zip(predictions, references, strict=True)
        total = sum(scorer.score(target=r, prediction=p)[kind].fmeasure for p, r in pairs)
        return float(total) / len(predictions)

    return score


def _bleu(predictions: Sequence[str], references: Sequence[str]) -> float:
    """sacrebleu's corpus BLEU, default settings (13a tokenisation, exponential smoothing)."""
    from sacrebleu.metrics import BLEU

    return float(BLEU().corpus_score(list(predictions), [list(references)]).score)


def _chrf(predictions: Sequence[str], references: Sequence[str]) -> float:
    """sacrebleu's corpus chrF, default settings (character 6-grams, beta 2)."""
    from sacrebleu.metrics import CHRF

    return float(CHRF().corpus_score(list(predictions), [list(references)]).score)


METRICS: dict[str, GenerationMetric] = {
    metric.name: metric
    for metric in (
        GenerationMetric("exact_match", 1.0, _mean_of(exact_match)),
        GenerationMetric("token_f1", 1.0, _mean_of(token_f1)),
        GenerationMetric("rouge1", 1.0, _rouge("rouge1")),
        GenerationMetric("rouge2", 1.0, _rouge("rouge2")),
        GenerationMetric("rougeL", 1.0, _rouge("rougeL")),
        GenerationMetric("bleu", 100.0, _bleu),
        GenerationMetric("chrf", 100.0, _chrf),
    )
}
"""Every generation metric by name."""

GENERATION_METRICS: tuple[str, ...] = tuple(METRICS)
"""The names `generation_scores` takes, in the order listings show them."""

HIGHER_IS_BETTER: frozenset[str] = frozenset(
    name for name, metric in METRICS.items() if metric.higher_is_better
)
"""The generation metrics where a higher score is better (all of them)."""


def check_metrics(metrics: Sequence[str]) -> None:
    """Refuse, in one line listing the known names, a metric name that is not one."""
    if isinstance(metrics, str):
        raise ConfigError(f"metrics must be a list of names, got the string {shown(metrics)}")
    for name in metrics:
        if name not in GENERATION_METRICS:
            raise ConfigError(
                f"unknown generation metric {shown(name)}; choose from "
                f"{', '.join(GENERATION_METRICS)}"
            )


def generation_scores(
    predictions: Sequence[str], references: Sequence[str], metrics: Sequence[str]
) -> dict[str, float]:
    """Each of `metrics` for the predictions against their references (one each, in order)."""
    check_metrics(metrics)
    if len(predictions) != len(references):
        raise DataError(
            f"{len(predictions)} predictions and {len(references)} references; generation "
            "scores need one reference per prediction"
        )
    if not predictions:
        raise DataError("no predictions to score: generation scores need at least one pair")
    return {name: METRICS[name].score(predictions, references) for name in metrics}

"""Generation metrics: exact match and token F1 as SQuAD v1.1's evaluation script computes them
(hand-checked cases), ROUGE, BLEU and chrF equal to rouge-score's and sacrebleu's own numbers
(empty predictions, punctuation and articles included); bad arguments fail in one line."""

from __future__ import annotations

from typing import Any

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from adaptlab.errors import AdaptlabError
from adaptlab.tasks.generation_metrics import (
    GENERATION_METRICS,
    HIGHER_IS_BETTER,
    METRICS,
    exact_match,
    generation_scores,
    normalize_answer,
    token_f1,
)

PAIRS = [
    ("The Eiffel Tower!", "eiffel tower"),
    ("in Paris, France", "Paris"),
    ("", "the capital of France is Paris."),
    ("the cats were sitting on a mat", "A cat sat on the mat."),
    ("don't stop", "do not stop"),
    ("Summaries are short; they keep the main points.", "A summary keeps the main points."),
]
"""Predictions and references: punctuation, articles, an empty prediction, stems."""


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  An apple,  a day ", "apple day"),
        ("Theory of an anthem", "theory of anthem"),  # whole words only
        ("don't", "dont"),  # punctuation goes without leaving a space
        ("THE", ""),
        ("café — naïve", "café — naïve"),  # only ASCII punctuation, as the script
    ],
)
def test_normalisation_is_the_squad_scripts(text: str, normalised: str) -> None:
    assert normalize_answer(text) == normalised


@pytest.mark.parametrize(
    ("prediction", "reference", "em", "f1"),
    [
        ("The Eiffel Tower!", "eiffel tower", 1.0, 1.0),
        ("in Paris, France", "Paris", 0.0, 0.5),  # P 1/3, R 1: 2 * (1/3) / (4/3)
        ("the the cat cat", "a cat", 0.0, 2 / 3),  # multisets: one cat shared, P 1/2, R 1
        ("cat cat dog", "cat cat", 0.0, 0.8),  # two cats shared: P 2/3, R 1
        ("", "Paris", 0.0, 0.0),
        ("don't", "do not", 0.0, 0.0),
        ("The.", "an", 1.0, 0.0),  # both normalise to nothing: equal, but no shared word
    ],
)
def test_exact_match_and_f1_on_squad_cases(
    prediction: str, reference: str, em: float, f1: float
) -> None:
    assert exact_match(prediction, reference) == em
    assert token_f1(prediction, reference) == pytest.approx(f1)


def test_exact_match_and_f1_are_means_from_0_to_1() -> None:
    predictions = ["The Eiffel Tower!", "in Paris, France", ""]
    references = ["eiffel tower", "Paris", "Paris"]
    scores = generation_scores(predictions, references, ["exact_match", "token_f1"])
    assert scores == pytest.approx({"exact_match": 1 / 3, "token_f1": 0.5})


def test_rouge_is_rouge_scores_stemmed_mean_f_measure() -> None:
    predictions, references = zip(*PAIRS, strict=True)
    scores = generation_scores(predictions, references, ["rouge1", "rouge2", "rougeL"])
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    per_pair = [scorer.score(r, p) for p, r in PAIRS]
    for kind in ("rouge1", "rouge2", "rougeL"):
        expected = sum(s[kind].fmeasure for s in per_pair) / len(PAIRS)
        assert scores[kind] == pytest.approx(expected, abs=1e-12)
    stemmed = generation_scores(["the cats sat"], ["a cat sat"], ["rouge1", "rouge2"])
    assert stemmed == pytest.approx({"rouge1": 2 / 3, "rouge2": 1 / 2})  # cats -> cat


def test_bleu_and_chrf_are_sacrebleus_corpus_scores() -> None:
    predictions, references = map(list, zip(*PAIRS, strict=True))
    scores = generation_scores(predictions, references, ["bleu", "chrf"])
    bleu = sacrebleu.corpus_bleu(predictions, [references]).score
    chrf = sacrebleu.corpus_chrf(predictions, [references]).score
    assert scores == pytest.approx({"bleu": bleu, "chrf": chrf}, abs=1e-9)
    assert 0 < scores["bleu"] < 100 and 0 < scores["chrf"] < 100
    same = generation_scores(references, references, ["bleu", "chrf"])
    assert same == pytest.approx({"bleu": 100.0, "chrf": 100.0})


def test_scores_come_as_asked_and_every_metric_is_higher_is_better() -> None:
    assert GENERATION_METRICS == (
        "exact_match",
        "token_f1",
        "rouge1",
        "rouge2",
        "rougeL",
        "bleu",
        "chrf",
    )
    assert set(GENERATION_METRICS) == HIGHER_IS_BETTER
    same = ["the cat sat on the mat"]  # BLEU needs 4-grams
    perfect = generation_scores(same, same, GENERATION_METRICS)
    assert list(perfect) == list(GENERATION_METRICS)
    assert perfect == pytest.approx({name: METRICS[name].best for name in GENERATION_METRICS})
    assert generation_scores(["x"], ["y"], []) == {}


@pytest.mark.parametrize(
    ("arguments", "needles"),
    [
        ((["a"], ["a"], ["bleu4"]), ["'bleu4'", "exact_match, token_f1", "chrf"]),
        ((["a"], ["a"], "bleu"), ["metrics", "list", "'bleu'"]),
        ((["a", "b"], ["a"], ["bleu"]), ["2 predictions", "1 references"]),
        (([], [], ["token_f1"]), ["no predictions"]),
    ],
)
def test_bad_arguments_fail_in_one_line(arguments: tuple[Any, ...], needles: list[str]) -> None:
    with pytest.raises(AdaptlabError) as caught:
        generation_scores(*arguments)
    message = str(caught.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message


def test_scoring_rouge_leaves_the_root_logger_alone() -> None:
    import logging

    before = list(logging.root.handlers)
    logging.root.handlers = []  # as in a fresh `adaptlab` process
    try:
        generation_scores(["a cat"], ["the cat"], ["rouge1", "rougeL"])
        assert logging.root.handlers == []  # else every adaptlab log line prints twice
    finally:
        logging.root.handlers = before

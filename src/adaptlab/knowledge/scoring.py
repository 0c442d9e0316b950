"""How well a model knows a fact: answer probability, greedy correctness, perplexity."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from adaptlab.finite import exp_or_inf
from adaptlab.knowledge.facts import Fact, FactSet
from adaptlab.knowledge.lm import KnowledgeLM
from adaptlab.knowledge.prompts import token_queries
from adaptlab.progress import track


@dataclass(frozen=True)
class AnswerScore:
    """The answer's log-probability (teacher-forced over its tokens), and the model's guess."""

    log_prob: float
    num_tokens: int
    correct: bool  # every answer token is the argmax at its position
    first_prediction: int  # the argmax token at the first answer position
    first_target: int

    @property
    def probability(self) -> float:
        return math.exp(self.log_prob)


def score_answer(lm: KnowledgeLM, template: str, subject: str, answer: str) -> AnswerScore:
    """One forward pass reads every answer token (all queries share the longest input)."""
    queries = token_queries(lm, template, subject, answer)
    ids = queries[-1].input_ids[None]
    log_prob, correct, first = 0.0, True, -1
    with torch.no_grad():
        hidden_logits = lm.model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0]
    for i, query in enumerate(queries):
        log_probs = hidden_logits[query.position].log_softmax(-1)
        log_prob += log_probs[query.target].item()
        guess = int(log_probs.argmax().item())
        correct = correct and guess == query.target
        if i == 0:
            first = guess
    return AnswerScore(log_prob, len(queries), correct, first, queries[0].target)


def fact_scores(lm: KnowledgeLM, facts: FactSet, fact: Fact) -> list[AnswerScore]:
    """The fact's answer score under each template of its relation."""
    return [
        score_answer(lm, template, fact.subject, fact.object)
        for template in facts.templates[fact.relation]
    ]


def known_facts(
    lm: KnowledgeLM,
    facts: FactSet,
    min_fraction: float = 0.5,
    limit: int | None = None,
    progress: bool = True,
) -> tuple[FactSet, int]:
    """The facts answered correctly (greedy) under at least `min_fraction` of their templates.

    Checks facts in order and stops once `limit` are kept; returns them and how many were checked.
    """
    kept: list[Fact] = []
    checked = 0
    for fact in track(facts.facts, desc="checking facts", unit="fact", enabled=progress):
        if limit is not None and len(kept) >= limit:
            break
        checked += 1
        scores = fact_scores(lm, facts, fact)
        if sum(s.correct for s in scores) >= min_fraction * len(scores):
            kept.append(fact)
    return facts.with_facts(kept), checked


def perplexity(lm: KnowledgeLM, facts: FactSet, items: list[Fact]) -> float:
    """exp of the mean negative log-likelihood per answer token, over every template of `items`
    (NaN for no items; infinite past the largest float)."""
    total, tokens = 0.0, 0
    for fact in items:
        for score in fact_scores(lm, facts, fact):
            total -= score.log_prob
            tokens += score.num_tokens
    return exp_or_inf(total / tokens) if tokens else math.nan


def mean_probability(lm: KnowledgeLM, facts: FactSet, fact: Fact) -> float:
    """The answer's probability averaged over the relation's templates."""
    scores = fact_scores(lm, facts, fact)
    return sum(s.probability for s in scores) / len(scores)

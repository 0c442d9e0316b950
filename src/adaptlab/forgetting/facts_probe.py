"""`facts:SOURCE`: facts the base model answers (`countries`: the countryinfo relations the
knowledge-neuron code reads, or a fact file of `adaptlab.knowledge`), and how many of them the
adapted model still answers.

A fact counts as answered when the greedy continuation gives every answer token under at least
half of its relation's templates (`adaptlab.knowledge.scoring.known_facts`' rule). The base is
asked the facts in a seeded order until it has answered `limit` of them; those are the items,
so the forgetting is the share of them the adapted model no longer answers.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from transformers import PreTrainedModel

from adaptlab.errors import ConfigError, DataError
from adaptlab.forgetting.options import ProbeOptions
from adaptlab.forgetting.paired import ItemScores
from adaptlab.forgetting.probe import Probe, ProbedModel
from adaptlab.knowledge.fact_sources import load_facts
from adaptlab.knowledge.facts import Fact, FactSet
from adaptlab.knowledge.lm import KnowledgeLM
from adaptlab.knowledge.prompts import check_template
from adaptlab.knowledge.scoring import fact_scores
from adaptlab.progress import track

ANSWERED = "fact answered"
MIN_FRACTION = 0.5


class FactsProbe(Probe):
    """Whether the model answers the facts of `facts` (asked in their order), up to `limit`
    answered by the base."""

    def __init__(self, name: str, facts: FactSet, limit: int) -> None:
        self.name, self.facts, self.limit = name, facts, limit
        self.by_key = {_key(fact): fact for fact in facts.facts}

    def score(self, probed: ProbedModel, items: Sequence[str] | None = None) -> ItemScores:
        """With `items`, those facts; else facts in order until `limit` are answered."""
        model = probed.model
        assert isinstance(model, PreTrainedModel), type(model).__name__
        lm = KnowledgeLM(model, probed.tokenizer, "causal", [], [])
        asked = [self.by_key[item] for item in items] if items is not None else self.facts.facts
        was_training = model.training
        model.eval()
        values: dict[str, float] = {}
        try:
            for fact in track(asked, self.name, "fact", enabled=probed.progress):
                if items is None and sum(values.values()) >= self.limit:
                    break
                scores = fact_scores(lm, self.facts, fact)
                answered = sum(s.correct for s in scores) >= MIN_FRACTION * len(scores)
                values[_key(fact)] = float(answered)
        finally:
            model.train(was_training)
        return ItemScores(ANSWERED, True, values)

    def compared_items(self, base: ItemScores) -> list[str]:
        known = [item for item, value in base.values.items() if value]
        if not known:
            raise DataError(
                f"probe {self.name}: the base model answers none of its {len(base.values)} "
                "facts, so there is nothing to forget; drop the probe or give facts it knows"
            )
        return known

    def details(self, base: ItemScores, adapted: ItemScores) -> dict[str, Any]:
        return {"facts_asked_base": len(base.values)}


def facts_probe(value: str, options: ProbeOptions) -> FactsProbe:
    """The probe of fact source `value` (`countries`: the built-in set), its facts in a
    seeded order."""
    facts = load_facts(f"builtin:{value}" if value == "countries" else value)
    for template in (t for templates in facts.templates.values() for t in templates):
        try:
            check_template(template, causal=True)
        except ConfigError as error:
            raise DataError(f"probe facts:{value}: {error}") from None
    shuffled = list(facts.facts)
    random.Random(options.seed).shuffle(shuffled)
    return FactsProbe(f"facts:{value}", facts.with_facts(shuffled), options.limit)


def _key(fact: Fact) -> str:
    return f"{fact.relation}: {fact.subject} -> {fact.object}"

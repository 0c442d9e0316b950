"""The slides' editing tables: updating facts and erasing relations, knowledge vs random neurons.

Updating (slides, "Updating Facts"): per fact <h, r, t>, t' is the object of another fact of
the relation; over the relation's templates, the change rate is the share of prompts whose
top prediction is no longer t's first token, the success rate the share predicting t''s first
token; Δ PPL is the perplexity change on other facts of the same relation (intra) and of
other relations (inter). Erasing (slides, "Erasing Relations"): zero the value slots of the
union of a relation's knowledge neurons; perplexity of that relation and of the others, before
and after. Every edit is undone before the next. Without facts of other relations, their
perplexities are None (not measured), never a NaN.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from adaptlab.knowledge.editing import LAMBDA1, LAMBDA2, erase, update_fact, value_slot_edit
from adaptlab.knowledge.effects import random_control
from adaptlab.knowledge.facts import Fact, FactSet
from adaptlab.knowledge.hooks import Neuron
from adaptlab.knowledge.lm import KnowledgeLM
from adaptlab.knowledge.neurons import FactNeurons
from adaptlab.knowledge.prompts import answer_ids
from adaptlab.knowledge.scoring import perplexity, score_answer
from adaptlab.progress import track

SAMPLE = 8


@dataclass(frozen=True)
class UpdateRow:
    """One fact update with one neuron set (knowledge or random)."""

    subject: str
    old: str
    new: str
    neurons: str  # "knowledge" or "random"
    change_rate: float
    success_rate: float
    intra_ppl_before: float
    intra_ppl_after: float
    inter_ppl_before: float | None  # None: no facts of other relations
    inter_ppl_after: float | None


@dataclass(frozen=True)
class EraseResult:
    """Perplexity of the erased relation and of the others, before and after, per neuron set."""

    relation: str
    neurons: str
    count: int
    relation_before: float
    relation_after: float
    others_before: float | None  # None: no facts of other relations
    others_after: float | None


def _predictions(lm: KnowledgeLM, facts: FactSet, fact: Fact, new: str) -> tuple[float, float]:
    """Change and success rates over the relation's templates."""
    changed = success = 0
    templates = facts.templates[fact.relation]
    for template in templates:
        score = score_answer(lm, template, fact.subject, fact.object)
        changed += score.first_prediction != score.first_target
        success += score.first_prediction == answer_ids(lm, template, new)[0]
    return changed / len(templates), success / len(templates)


def update_experiment(
    lm: KnowledgeLM,
    facts: FactSet,
    others: FactSet,
    results: list[FactNeurons],
    lambda1: float = LAMBDA1,
    lambda2: float = LAMBDA2,
    seed: int = 0,
    progress: bool = True,
) -> list[UpdateRow]:
    """Update each fact to another object of its relation, with its neurons and random ones."""
    rng = random.Random(seed)
    rows = []
    pool = [r.fact for r in results]
    objects = sorted({fact.object for fact in pool})
    inter = rng.sample(others.facts, min(SAMPLE, len(others.facts)))
    inter_before = _perplexity(lm, others, inter)  # the unedited model: the same for every fact
    for result in track(results, desc="updating", unit="fact", enabled=progress):
        fact = result.fact
        choices = [o for o in objects if o != fact.object]
        if not result.neurons or not choices:
            continue
        new = rng.choice(choices)
        intra_pool = [f for f in pool if f != fact]
        intra = rng.sample(intra_pool, min(SAMPLE, len(intra_pool)))
        template = facts.templates[fact.relation][0]
        old_token = answer_ids(lm, template, fact.object)[0]
        new_token = answer_ids(lm, template, new)[0]
        sets = {
            "knowledge": result.neurons,
            "random": random_control(result.neurons, lm.num_neurons, rng),
        }
        intra_before = perplexity(lm, facts, intra)
        for name, neurons in sets.items():
            with value_slot_edit(lm) as edit:
                update_fact(edit, neurons, old_token, new_token, lambda1, lambda2)
                change, success = _predictions(lm, facts, fact, new)
                intra_after = perplexity(lm, facts, intra)
                inter_after = _perplexity(lm, others, inter)
            rows.append(
                UpdateRow(
                    fact.subject,
                    fact.object,
                    new,
                    name,
                    change,
                    success,
                    intra_before,
                    intra_after,
                    inter_before,
                    inter_after,
                )  # fmt: skip
            )
    return rows


def summarise_updates(rows: list[UpdateRow]) -> dict[str, dict[str, float | None]]:
    """The slides' table: mean change and success rates and Δ perplexities, per neuron set
    (Δ inter None when no other relation was measured)."""
    table: dict[str, dict[str, float | None]] = {}
    for name in ("knowledge", "random"):
        chosen = [r for r in rows if r.neurons == name]
        n = max(len(chosen), 1)
        inter = [
            r.inter_ppl_after - r.inter_ppl_before
            for r in chosen
            if r.inter_ppl_after is not None and r.inter_ppl_before is not None
        ]
        table[name] = {
            "facts": len(chosen),
            "change_rate": sum(r.change_rate for r in chosen) / n,
            "success_rate": sum(r.success_rate for r in chosen) / n,
            "delta_intra_ppl": sum(r.intra_ppl_after - r.intra_ppl_before for r in chosen) / n,
            "delta_inter_ppl": sum(inter) / len(inter) if inter else None,
        }
    return table


def _perplexity(lm: KnowledgeLM, facts: FactSet, items: list[Fact]) -> float | None:
    """The perplexity of `items`; None when there are none (no other relation to measure)."""
    return perplexity(lm, facts, items) if items else None


def relation_neurons(results: list[FactNeurons]) -> list[Neuron]:
    """The union of the knowledge neurons of a relation's facts, in first-seen order."""
    return list(dict.fromkeys(n for result in results for n in result.neurons))


def erase_experiment(
    lm: KnowledgeLM,
    facts: FactSet,
    others: FactSet,
    results: list[FactNeurons],
    seed: int = 0,
) -> list[EraseResult]:
    """Zero the relation's knowledge neurons (and, separately, as many random ones)."""
    rng = random.Random(seed)
    relation = facts.relations[0] if facts.relations else ""
    own = [r.fact for r in results]
    inter = rng.sample(others.facts, min(SAMPLE * 4, len(others.facts)))
    neurons = relation_neurons(results)
    relation_before = perplexity(lm, facts, own)
    others_before = _perplexity(lm, others, inter)
    found = []
    for name, chosen in (
        ("knowledge", neurons),
        ("random", random_control(neurons, lm.num_neurons, rng)),
    ):
        with value_slot_edit(lm) as edit:
            erase(edit, chosen)
            after = perplexity(lm, facts, own), _perplexity(lm, others, inter)
        found.append(
            EraseResult(
                relation, name, len(chosen), relation_before, after[0], others_before, after[1]
            )
        )
    return found

"""A base model against its adapted model on the same facts: which answers and which knowledge
neurons adaptation changed.

Both models are one object: the adapted model, and its base with adaptation switched off
(`adaptlab.disabled`), so every score and every attribution runs through the same modules.
Each fact is answered by both (greedy correctness under each template and the answer's
probability, `adaptlab.knowledge.scoring`), so a fact is *kept* (both answer it), *lost*
(the base does, the adapted model does not), *gained* or answered by *neither*. The facts
either model answers get their knowledge neurons in both (`find_fact_neurons`, as `neurons
find` finds them), and the two sets are compared: their Jaccard index, the neurons kept, lost
and new, and how many each model has per layer.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any, Literal

from adaptlab.knowledge.facts import Fact, FactSet
from adaptlab.knowledge.hooks import Neuron
from adaptlab.knowledge.lm import KnowledgeLM
from adaptlab.knowledge.neurons import FactNeurons, find_fact_neurons
from adaptlab.knowledge.quadrature import DEFAULT_RULE
from adaptlab.knowledge.scoring import fact_scores
from adaptlab.methods.adapt import disabled
from adaptlab.progress import track

Outcome = Literal["kept", "lost", "gained", "neither"]
OUTCOMES: tuple[Outcome, ...] = ("kept", "lost", "gained", "neither")
MODELS = ("base", "adapted")
GROUPS = {"base_known": "base", "adapted_known": "adapted"}
"""Summary groups: the facts the base answers, and those the adapted model answers."""


@dataclass(frozen=True)
class Answer:
    """How one model answers one fact: the share of templates under which every answer token
    is the greedy choice, whether that share reaches the threshold, and the answer's
    probability (mean over the templates)."""

    share: float
    answered: bool
    probability: float


@dataclass(frozen=True)
class NeuronOverlap:
    """One fact's knowledge neurons in the base and in the adapted model, and how they overlap.

    `jaccard` is |base ∩ adapted| / |base ∪ adapted| (None when both are empty); `kept` the
    neurons in both, `lost` those of the base alone, `new` those of the adapted model alone;
    `*_layers` the neurons per layer.
    """

    base: list[Neuron]
    adapted: list[Neuron]
    base_scores: list[float]
    adapted_scores: list[float]
    jaccard: float | None
    kept: int
    lost: int
    new: int
    base_layers: list[int]
    adapted_layers: list[int]


@dataclass(frozen=True)
class FactComparison:
    """One fact under both models; `neurons` for the facts either model answers (else None)."""

    fact: Fact
    base: Answer
    adapted: Answer
    neurons: NeuronOverlap | None = None

    @property
    def outcome(self) -> Outcome:
        return outcome(self.base.answered, self.adapted.answered)


def outcome(base: bool, adapted: bool) -> Outcome:
    """kept (both answer), lost (the base alone), gained (the adapted model alone), neither."""
    if base:
        return "kept" if adapted else "lost"
    return "gained" if adapted else "neither"


def per_layer(neurons: list[Neuron], num_layers: int) -> list[int]:
    """How many of `neurons` each layer holds."""
    counts = [0] * num_layers
    for layer, _ in neurons:
        counts[layer] += 1
    return counts


def overlap(base: FactNeurons, adapted: FactNeurons, num_layers: int) -> NeuronOverlap:
    """Compare one fact's neurons in the base (`base`) and in the adapted model (`adapted`)."""
    before, after = set(base.neurons), set(adapted.neurons)
    union = before | after
    return NeuronOverlap(
        base=list(base.neurons),
        adapted=list(adapted.neurons),
        base_scores=list(base.scores),
        adapted_scores=list(adapted.scores),
        jaccard=len(before & after) / len(union) if union else None,
        kept=len(before & after),
        lost=len(before - after),
        new=len(after - before),
        base_layers=per_layer(base.neurons, num_layers),
        adapted_layers=per_layer(adapted.neurons, num_layers),
    )


def answer(lm: KnowledgeLM, facts: FactSet, fact: Fact, min_correct: float) -> Answer:
    """How the model as it runs now answers `fact` (`known_facts`' rule: answered under at
    least `min_correct` of the relation's templates)."""
    scores = fact_scores(lm, facts, fact)
    correct = sum(s.correct for s in scores)
    return Answer(
        share=correct / len(scores),
        answered=correct >= min_correct * len(scores),
        probability=sum(s.probability for s in scores) / len(scores),
    )


BaseSwitch = Callable[[], AbstractContextManager[Any]]
"""A context in which the model runs as its base (`adaptlab.disabled` by default)."""


def compare_facts(
    lm: KnowledgeLM,
    facts: FactSet,
    *,
    min_correct: float = 0.5,
    limit: int | None = None,
    steps: int | None = None,
    rule: str = DEFAULT_RULE,
    tolerance: float | None = None,
    progress: bool = True,
    base: BaseSwitch | None = None,
) -> list[FactComparison]:
    """Every fact, in order until `limit` are answered by the base or the adapted model, under
    both; the neurons of those answered, found in both with `find`'s code and settings
    (`steps`, `rule`, `tolerance`: the quadrature)."""
    switch: BaseSwitch = base or (lambda: disabled(lm.model))
    rows: list[FactComparison] = []
    answered = 0
    for fact in track(facts.facts, desc="answering facts", unit="fact", enabled=progress):
        if limit is not None and answered >= limit:
            break
        with switch():
            before = answer(lm, facts, fact, min_correct)
        after = answer(lm, facts, fact, min_correct)
        rows.append(FactComparison(fact, before, after))
        answered += before.answered or after.answered
    chosen = [i for i, row in enumerate(rows) if row.outcome != "neither"]
    for i in track(chosen, desc="attributing", unit="fact", enabled=progress):
        fact = rows[i].fact
        with switch():
            found_base = find_fact_neurons(lm, facts, fact, steps, rule=rule, tolerance=tolerance)
        found = find_fact_neurons(lm, facts, fact, steps, rule=rule, tolerance=tolerance)
        rows[i] = replace(rows[i], neurons=overlap(found_base, found, lm.num_layers))
    return rows


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarise(rows: list[FactComparison], num_layers: int) -> dict[str, Any]:
    """What the comparison found: facts answered by each model and how many were kept, lost
    and gained; the mean answer probability under each; and, over the facts each model
    answers, the mean Jaccard index of the neuron sets, the neurons kept, lost and new, and
    the neurons per layer in the base and in the adapted model."""
    counts = {name: sum(row.outcome == name for row in rows) for name in OUTCOMES}
    summary: dict[str, Any] = {
        "checked": len(rows),
        "answered": {
            "base": sum(row.base.answered for row in rows),
            "adapted": sum(row.adapted.answered for row in rows),
            **counts,
        },
        "mean_probability": {
            "base": _mean([row.base.probability for row in rows]),
            "adapted": _mean([row.adapted.probability for row in rows]),
        },
    }
    for group, model in GROUPS.items():
        chosen = [
            row.neurons for row in rows if getattr(row, model).answered and row.neurons is not None
        ]
        jaccards = [n.jaccard for n in chosen if n.jaccard is not None]
        summary[group] = {
            "facts": len(chosen),
            "mean_jaccard": _mean(jaccards),
            "neurons": {
                "base": sum(len(n.base) for n in chosen),
                "adapted": sum(len(n.adapted) for n in chosen),
                "kept": sum(n.kept for n in chosen),
                "lost": sum(n.lost for n in chosen),
                "new": sum(n.new for n in chosen),
            },
            "layers": {
                "base": _layer_sum([n.base_layers for n in chosen], num_layers),
                "adapted": _layer_sum([n.adapted_layers for n in chosen], num_layers),
            },
        }
    return summary


def _layer_sum(counts: list[list[int]], num_layers: int) -> list[int]:
    return [sum(c[layer] for c in counts) for layer in range(num_layers)]


def row_data(row: FactComparison) -> dict[str, Any]:
    """One fact's comparison as a JSON object."""
    neurons = row.neurons
    return {
        "subject": row.fact.subject,
        "relation": row.fact.relation,
        "object": row.fact.object,
        "outcome": row.outcome,
        "base": _answer_data(row.base),
        "adapted": _answer_data(row.adapted),
        "neurons": None
        if neurons is None
        else {
            "base": [list(n) for n in neurons.base],
            "adapted": [list(n) for n in neurons.adapted],
            "base_scores": neurons.base_scores,
            "adapted_scores": neurons.adapted_scores,
            "jaccard": neurons.jaccard,
            "kept": neurons.kept,
            "lost": neurons.lost,
            "new": neurons.new,
            "layers": {"base": neurons.base_layers, "adapted": neurons.adapted_layers},
        },
    }


def _answer_data(answer: Answer) -> dict[str, Any]:
    return {"share": answer.share, "answered": answer.answered, "probability": answer.probability}

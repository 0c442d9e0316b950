"""Find each fact's knowledge neurons: attribute every prompt of the fact, then refine."""

from __future__ import annotations

from dataclasses import dataclass, field

from adaptlab.knowledge.attribution import attribute
from adaptlab.knowledge.facts import Fact, FactSet
from adaptlab.knowledge.hooks import Neuron
from adaptlab.knowledge.lm import KnowledgeLM
from adaptlab.knowledge.quadrature import DEFAULT_RULE
from adaptlab.knowledge.refine import SHARE, THRESHOLD, refine
from adaptlab.progress import track


@dataclass
class FactNeurons:
    """One fact's knowledge neurons (integrated gradients) and the activation-baseline ones."""

    fact: Fact
    neurons: list[Neuron]
    scores: list[float]
    share: float
    probability: float  # the answer's probability, mean over the relation's templates
    baseline_neurons: list[Neuron] = field(default_factory=list)


def find_fact_neurons(
    lm: KnowledgeLM,
    facts: FactSet,
    fact: Fact,
    steps: int | None = None,
    threshold: float = THRESHOLD,
    share: float = SHARE,
    rule: str = DEFAULT_RULE,
    tolerance: float | None = None,
) -> FactNeurons:
    """Attribute the fact under each template of its relation and refine across them.

    `steps`, `rule` and `tolerance` choose the quadrature (`attribute`).
    """
    parts = [
        attribute(lm, template, fact.subject, fact.object, steps, rule, tolerance)
        for template in facts.templates[fact.relation]
    ]
    found = refine([p.scores for p in parts], threshold, share)
    baseline = refine([p.activations for p in parts], threshold, share)
    probability = sum(p.probability for p in parts) / len(parts)
    return FactNeurons(
        fact, found.neurons, found.scores, found.share, probability, baseline.neurons
    )


def find_neurons(
    lm: KnowledgeLM,
    facts: FactSet,
    steps: int | None = None,
    threshold: float = THRESHOLD,
    share: float = SHARE,
    progress: bool = True,
    rule: str = DEFAULT_RULE,
    tolerance: float | None = None,
) -> list[FactNeurons]:
    """Knowledge neurons of every fact; `steps`, `rule`, `tolerance` as in `attribute`."""
    return [
        find_fact_neurons(lm, facts, fact, steps, threshold, share, rule, tolerance)
        for fact in track(facts.facts, desc="attributing", unit="fact", enabled=progress)
    ]


def layer_histogram(results: list[FactNeurons], num_layers: int) -> list[int]:
    """How many knowledge neurons each layer holds, over all facts ("KNs @ layer")."""
    counts = [0] * num_layers
    for result in results:
        for layer, _ in result.neurons:
            counts[layer] += 1
    return counts

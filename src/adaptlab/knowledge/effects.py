"""Suppress (x0) or amplify (x2) knowledge neurons, beside as many random ones of their layers.

Dai et al. (slides, "Suppressing KNs" / "Amplifying KNs"): set the knowledge neurons'
activations to 0, or double them, and measure the change of the correct answer's probability.
The control scales the same number of random neurons drawn from the same layers.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from adaptlab.errors import ConfigError
from adaptlab.knowledge.facts import FactSet
from adaptlab.knowledge.hooks import Neuron, scaled_neurons
from adaptlab.knowledge.lm import KnowledgeLM
from adaptlab.knowledge.neurons import FactNeurons
from adaptlab.knowledge.scoring import mean_probability
from adaptlab.progress import track

SUPPRESS, AMPLIFY = 0.0, 2.0


@dataclass(frozen=True)
class EffectRow:
    """The correct answer's probability (mean over templates) before and after, for one fact."""

    subject: str
    object: str
    neurons: int
    before: float
    knowledge: float  # with the fact's knowledge neurons scaled
    random: float  # with as many random neurons of the same layers scaled

    @property
    def knowledge_change(self) -> float | None:
        """Relative change; None when the answer had probability 0 before (no relative change
        exists)."""
        return _relative(self.knowledge, self.before)

    @property
    def random_change(self) -> float | None:
        return _relative(self.random, self.before)


def _relative(after: float, before: float) -> float | None:
    return (after - before) / before if before else None


def random_control(neurons: list[Neuron], num_neurons: int, rng: random.Random) -> list[Neuron]:
    """One random neuron per given neuron, in the same layer, never one of `neurons`."""
    taken = set(neurons)
    for layer in {layer for layer, _ in neurons}:
        needed = 2 * sum(1 for other, _ in neurons if other == layer)
        if needed > num_neurons:
            raise ConfigError(
                f"layer {layer} has {num_neurons} neurons, too few to draw "
                f"{needed // 2} random ones beside as many knowledge neurons"
            )
    chosen: list[Neuron] = []
    for layer, _ in neurons:
        while True:
            candidate = (layer, rng.randrange(num_neurons))
            if candidate not in taken:
                taken.add(candidate)
                chosen.append(candidate)
                break
    return chosen


def neuron_effects(
    lm: KnowledgeLM,
    facts: FactSet,
    results: list[FactNeurons],
    factor: float,
    seed: int = 0,
    progress: bool = True,
) -> list[EffectRow]:
    """Scale each fact's knowledge neurons by `factor` and, separately, a random control set."""
    rng = random.Random(seed)
    rows = []
    for result in track(results, desc=f"scaling x{factor:g}", unit="fact", enabled=progress):
        if not result.neurons:
            continue
        control = random_control(result.neurons, lm.num_neurons, rng)
        before = mean_probability(lm, facts, result.fact)
        with scaled_neurons(lm, result.neurons, factor):
            knowledge = mean_probability(lm, facts, result.fact)
        with scaled_neurons(lm, control, factor):
            randomised = mean_probability(lm, facts, result.fact)
        fact = result.fact
        rows.append(
            EffectRow(fact.subject, fact.object, len(result.neurons), before, knowledge, randomised)
        )
    return rows


def summarise(rows: list[EffectRow]) -> dict[str, float]:
    """Mean relative change of the correct answer's probability, knowledge vs random neurons,
    over the facts whose answer had a probability above 0 before."""
    rows = [row for row in rows if row.before > 0]
    if not rows:
        return {"facts": 0, "knowledge_change": math.nan, "random_change": math.nan}
    return {
        "facts": len(rows),
        "knowledge_change": sum((r.knowledge - r.before) / r.before for r in rows) / len(rows),
        "random_change": sum((r.random - r.before) / r.before for r in rows) / len(rows),
    }

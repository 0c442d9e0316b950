"""Knowledge neurons of a real fact in the offline SmolLM2-135M."""

from __future__ import annotations

import pytest

from adaptlab.knowledge import Fact, find_neurons, known_facts, load_facts, load_lm, scaled_neurons
from adaptlab.knowledge.scoring import mean_probability

pytestmark = pytest.mark.real


def test_suppressing_the_capital_neurons_of_france_lowers_paris() -> None:
    lm = load_lm("smollm2-135m")
    assert lm.kind == "causal" and lm.num_layers == 30
    capitals = load_facts("builtin:countries").of_relation("capital")
    france = capitals.with_facts([Fact("France", "capital", "Paris")])
    known, checked = known_facts(lm, france, progress=False)
    assert checked == 1 and known.facts == france.facts
    (found,) = find_neurons(lm, known, steps=8, rule="riemann", progress=False)
    assert 2 <= len(found.neurons) <= 5
    before = mean_probability(lm, france, france.facts[0])
    with scaled_neurons(lm, found.neurons, 0.0):
        after = mean_probability(lm, france, france.facts[0])
    assert after < before

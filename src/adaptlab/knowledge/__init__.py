"""Knowledge neurons: the FFN neurons that express a fact; suppress, amplify, update, erase."""

from typing import TYPE_CHECKING

from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
    from adaptlab.knowledge.attribution import Attribution, attribute, token_attribution
    from adaptlab.knowledge.edit_experiments import erase_experiment, update_experiment
    from adaptlab.knowledge.editing import ValueSlotEdit, erase, update_fact, value_slot_edit
    from adaptlab.knowledge.effects import AMPLIFY, SUPPRESS, neuron_effects
    from adaptlab.knowledge.fact_sources import load_facts
    from adaptlab.knowledge.facts import Fact, FactSet
    from adaptlab.knowledge.hooks import Neuron, scaled_neurons
    from adaptlab.knowledge.lm import KnowledgeLM, load_lm, wrap_lm
    from adaptlab.knowledge.neurons import FactNeurons, find_neurons, layer_histogram
    from adaptlab.knowledge.refine import Refined, refine
    from adaptlab.knowledge.scoring import known_facts

__all__ = [
    "AMPLIFY",
    "SUPPRESS",
    "Attribution",
    "Fact",
    "FactNeurons",
    "FactSet",
    "KnowledgeLM",
    "Neuron",
    "Refined",
    "ValueSlotEdit",
    "attribute",
    "erase",
    "erase_experiment",
    "find_neurons",
    "known_facts",
    "layer_histogram",
    "load_facts",
    "load_lm",
    "neuron_effects",
    "refine",
    "scaled_neurons",
    "token_attribution",
    "update_experiment",
    "update_fact",
    "value_slot_edit",
    "wrap_lm",
]

lazy_face(__name__)

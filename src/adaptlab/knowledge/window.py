"""Fact prompts longer than the model reads at once are refused before any work: past its
window a model with a table of positions fails, and one with rotary positions answers from
positions it never saw in training, so neither's attributions would mean anything."""

from __future__ import annotations

from adaptlab.checks import shown
from adaptlab.errors import DataError
from adaptlab.knowledge.facts import FactSet
from adaptlab.knowledge.lm import KnowledgeLM
from adaptlab.knowledge.prompts import input_length


def check_window(lm: KnowledgeLM, facts: FactSet) -> None:
    """Every fact of `facts` under every template of its relation fits `lm.window`; else a
    DataError naming the first fact and template that does not, and the window."""
    if lm.window is None:
        return
    for fact in facts.facts:
        for template in facts.templates[fact.relation]:
            length = input_length(lm, template, fact.subject, fact.object)
            if length > lm.window:
                what = shown(f"<{fact.subject}, {fact.relation}, {fact.object}>")
                raise DataError(
                    f"{facts.name}: the prompt of fact {what} under template {shown(template)} "
                    f"is {length} tokens, more than the {lm.window} that model "
                    f"{lm.model_id or type(lm.model).__name__} reads at once (its window); "
                    "shorten that fact or template, or leave it out"
                )

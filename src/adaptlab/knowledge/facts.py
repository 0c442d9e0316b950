"""Relational facts <subject, relation, object> with several prompt templates per relation.

Templates hold a [X] slot for the subject and a [Y] slot for the object, as in PARAREL.
`fact_sources` reads fact sets from files and the built-in set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adaptlab.errors import ConfigError, DataError
from adaptlab.knowledge.prompts import check_template

MIN_TEMPLATES = 1


@dataclass(frozen=True)
class Fact:
    """One relational fact <h, r, t>."""

    subject: str
    relation: str
    object: str


@dataclass
class FactSet:
    """Facts and the templates of their relations."""

    name: str
    facts: list[Fact]
    templates: dict[str, list[str]] = field(default_factory=dict)

    @property
    def relations(self) -> list[str]:
        return sorted({fact.relation for fact in self.facts})

    def of_relation(self, relation: str) -> FactSet:
        """The facts of one relation; an unknown relation is an error naming the known ones."""
        if relation not in self.templates:
            known = ", ".join(sorted(self.templates))
            raise DataError(f"{self.name}: no relation {relation!r}; relations: {known}")
        facts = [fact for fact in self.facts if fact.relation == relation]
        return FactSet(self.name, facts, {relation: self.templates[relation]})

    def with_facts(self, facts: list[Fact]) -> FactSet:
        """The same templates over other facts."""
        return FactSet(self.name, facts, self.templates)


def make_fact_set(
    name: str, facts: list[Fact], templates: Mapping[str, Any], templates_from: str | None = None
) -> FactSet:
    """Check that every relation has templates with one [X] and one [Y] each; a fault of the
    templates names `templates_from`, the file they were read from (default: `name`)."""
    where = templates_from or name
    if not isinstance(templates, Mapping):
        raise DataError(f"{where}: templates must map each relation to a list of templates")
    checked: dict[str, list[str]] = {}
    for relation, items in templates.items():
        if not isinstance(items, list) or len(items) < MIN_TEMPLATES:
            raise DataError(f"{where}: relation {relation!r} needs a list of templates")
        for template in items:
            try:
                check_template(str(template))
            except ConfigError as error:
                raise DataError(f"{where}: {error}") from None
        checked[str(relation)] = [str(t) for t in items]
    missing = sorted({fact.relation for fact in facts} - set(checked))
    if missing:
        facts_of = f" (of the facts of {name})" if where != name else ""
        raise DataError(f"{where}: no templates for relation(s) {', '.join(missing)}{facts_of}")
    if not facts:
        raise DataError(f"{name}: no facts")
    return FactSet(name, facts, checked)

"""Relational facts <subject, relation, object> with several prompt templates per relation.

Templates hold a [X] slot for the subject and a [Y] slot for the object, as in PARAREL.
A JSON file holds both: ``{"templates": {"capital": ["The capital of [X] is [Y]", ...]},
"facts": [{"subject": "France", "relation": "capital", "object": "Paris"}, ...]}``. A CSV file
holds facts only (columns subject, relation, object) and takes its templates from a JSON file
of the same ``{"relation": [templates]}`` shape. ``builtin:countries`` is the countryinfo set.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptlab.errors import DataError
from adaptlab.knowledge.prompts import check_template

BUILTIN_PREFIX = "builtin:"
FACT_COLUMNS = ("subject", "relation", "object")
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


def load_facts(source: str, templates: str | None = None) -> FactSet:
    """`builtin:countries`, a JSON file (facts and templates) or a CSV file plus `templates`."""
    if source.startswith(BUILTIN_PREFIX):
        from adaptlab.knowledge.countries import builtin_facts

        return builtin_facts(source.removeprefix(BUILTIN_PREFIX))
    path = Path(source)
    _check_file(path, "fact file", " (or use builtin:countries)")
    if path.suffix.lower() == ".json":
        data = _read_json(path)
        if not isinstance(data, dict) or not isinstance(data.get("facts"), list):
            raise DataError(f"{path}: a fact JSON file is an object with 'facts' and 'templates'")
        facts = [_fact(path, row) for row in data["facts"]]
        relation_templates = data.get("templates", {})
    elif path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(_read_text(path), newline=""))
        header = reader.fieldnames or []
        repeated = sorted({n for n in header if header.count(n) > 1} & set(FACT_COLUMNS))
        if repeated:
            raise DataError(f"{path}: column {repeated[0]!r} appears more than once")
        facts = [_fact(path, row) for row in reader]
        if templates is None:
            raise DataError(f"{path}: a CSV fact file needs a templates JSON file (--templates)")
        relation_templates = _read_json(Path(templates))
    else:
        raise DataError(f"{path}: fact files are .json or .csv")
    if templates is not None and path.suffix.lower() == ".json":
        relation_templates = _read_json(Path(templates))
    return make_fact_set(path.name, facts, relation_templates)


def make_fact_set(name: str, facts: list[Fact], templates: Mapping[str, Any]) -> FactSet:
    """Check that every relation has templates with one [X] and one [Y] each."""
    if not isinstance(templates, Mapping):
        raise DataError(f"{name}: templates must map each relation to a list of templates")
    checked: dict[str, list[str]] = {}
    for relation, items in templates.items():
        if not isinstance(items, list) or len(items) < MIN_TEMPLATES:
            raise DataError(f"{name}: relation {relation!r} needs a list of templates")
        for template in items:
            check_template(str(template))
        checked[str(relation)] = [str(t) for t in items]
    missing = sorted({fact.relation for fact in facts} - set(checked))
    if missing:
        raise DataError(f"{name}: no templates for relation(s) {', '.join(missing)}")
    if not facts:
        raise DataError(f"{name}: no facts")
    return FactSet(name, facts, checked)


def _check_file(path: Path, what: str = "file", hint: str = "") -> None:
    if not path.exists():
        raise DataError(f"{what} {str(path)!r} does not exist{hint}")
    if not path.is_file():
        raise DataError(f"{what} {str(path)!r} is a folder, not a file")


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(f"{path}: not UTF-8 text (byte {error.start})") from None
    except OSError as error:
        raise DataError(f"{path}: cannot be read ({error.strerror})") from None


def _read_json(path: Path) -> Any:
    _check_file(path)
    try:
        return json.loads(_read_text(path))
    except json.JSONDecodeError as error:
        raise DataError(f"{path}: not valid JSON ({error.msg}, line {error.lineno})") from None
    except (ValueError, RecursionError) as error:  # a number too long, nesting too deep
        raise DataError(f"{path}: not valid JSON ({type(error).__name__})") from None


def _fact(path: Path, row: Any) -> Fact:
    if isinstance(row, list | tuple) and len(row) == 3:
        row = dict(zip(FACT_COLUMNS, row, strict=True))
    if not isinstance(row, Mapping) or not all(
        row.get(k) and isinstance(row[k], str | int | float) for k in FACT_COLUMNS
    ):
        raise DataError(f"{path}: every fact needs a subject, relation and object, got {row!r}")
    return Fact(
        str(row["subject"]).strip(), str(row["relation"]).strip(), str(row["object"]).strip()
    )

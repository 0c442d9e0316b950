"""Where fact sets come from: the built-in set, a JSON file, or a CSV file plus templates.

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
from pathlib import Path
from typing import Any

from adaptlab.errors import DataError
from adaptlab.knowledge.countries import builtin_facts
from adaptlab.knowledge.facts import Fact, FactSet, make_fact_set

BUILTIN_PREFIX = "builtin:"
FACT_COLUMNS = ("subject", "relation", "object")


def load_facts(source: str, templates: str | None = None) -> FactSet:
    """`builtin:countries`, a JSON file (facts and templates) or a CSV file plus `templates`."""
    if source.startswith(BUILTIN_PREFIX):
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
    return make_fact_set(path.name, facts, relation_templates, templates)


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

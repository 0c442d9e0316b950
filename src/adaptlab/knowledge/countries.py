"""The built-in fact set: countries' capital, region, subregion, currency and language.

Read from the countryinfo package's data/*.json (one file per country) as `countries-qa` reads
it (`adaptlab.data.countries_qa.country_relations`): currencies and languages are ISO codes
there, named for the common ones, and facts whose code has no name are left out. Every
template ends with [Y], so causal LMs can use them.
"""

from __future__ import annotations

import json

from adaptlab.data.countries_qa import country_relations
from adaptlab.errors import DataError
from adaptlab.knowledge.facts import Fact, FactSet, make_fact_set
from adaptlab.models.builtin import package_folder

PACKAGE = "countryinfo==1.0.1"

TEMPLATES: dict[str, list[str]] = {
    "capital": [
        "The capital of [X] is [Y]",
        "The capital city of [X] is [Y]",
        "[X]'s capital is [Y]",
        "[X]'s capital city is [Y]",
    ],
    "region": [
        "[X] is a country in [Y]",
        "[X] is located in [Y]",
        "The country of [X] lies in [Y]",
    ],
    "subregion": [
        "[X] is a country in the region of [Y]",
        "Geographically, [X] belongs to [Y]",
        "The region of the world where [X] lies is [Y]",
    ],
    "currency": [
        "The currency of [X] is the [Y]",
        "The official currency of [X] is the [Y]",
        "In [X], people pay with the [Y]",
    ],
    "language": [
        "The official language of [X] is [Y]",
        "In [X], most people speak [Y]",
        "The main language spoken in [X] is [Y]",
    ],
}

BUILTIN_SETS = ("countries",)


def builtin_facts(name: str) -> FactSet:
    """The built-in fact set `name` (only `countries`)."""
    if name not in BUILTIN_SETS:
        raise DataError(f"no built-in fact set {name!r}; built-ins: builtin:countries")
    folder = package_folder("countryinfo")
    if folder is None or not (folder / "data").is_dir():
        raise DataError(f"builtin:countries needs its package: pip install --no-deps {PACKAGE}")
    facts = []
    for path in sorted((folder / "data").glob("*.json")):
        info = json.loads(path.read_text(encoding="utf-8"))
        facts.extend(country_facts(info))
    return make_fact_set("builtin:countries", facts, TEMPLATES)


def country_facts(info: dict[str, object]) -> list[Fact]:
    """The facts one countryinfo record gives (empty or unnamed values are left out)."""
    name = str(info.get("name") or "").strip()
    if not name:
        return []
    return [Fact(name, relation, value) for relation, value in country_relations(info).items()]

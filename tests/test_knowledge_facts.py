"""Fact files, the built-in countryinfo facts, and checking which facts a model knows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_knowledge_lm import tiny_lm

from adaptlab.errors import ConfigError, DataError
from adaptlab.knowledge.countries import TEMPLATES, country_facts
from adaptlab.knowledge.fact_sources import load_facts
from adaptlab.knowledge.facts import Fact
from adaptlab.knowledge.scoring import known_facts, perplexity, score_answer

FACTS = {
    "templates": {"capital": ["The capital of [X] is [Y].", "[X]'s capital is [Y]."]},
    "facts": [
        {"subject": "France", "relation": "capital", "object": "Paris"},
        ["Peru", "capital", "Lima"],
    ],
}


def test_json_and_csv_fact_files(tmp_path: Path) -> None:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(FACTS))
    facts = load_facts(str(path))
    assert facts.facts[1] == Fact("Peru", "capital", "Lima")
    assert facts.templates["capital"][1] == "[X]'s capital is [Y]."
    csv_path = tmp_path / "facts.csv"
    csv_path.write_text("subject,relation,object\nFrance,capital,Paris\n")
    templates = tmp_path / "templates.json"
    templates.write_text(json.dumps(FACTS["templates"]))
    assert load_facts(str(csv_path), str(templates)).facts == [Fact("France", "capital", "Paris")]
    with pytest.raises(DataError, match="templates"):
        load_facts(str(csv_path))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"templates": {"capital": ["The capital of [X]"]}}, "one \\[X\\] and one \\[Y\\]"),
        ({"templates": {"region": ["[X] is in [Y]"]}}, "no templates for relation"),
        ({"facts": [{"subject": "France", "relation": "capital"}]}, "subject, relation and"),
        ({"facts": "France"}, "an object with 'facts' and 'templates'"),
        ({"facts": [["France", "capital", ["Paris"]]]}, "subject, relation and object"),
        ({"templates": ["The capital of [X] is [Y]."]}, "templates must map each relation"),
    ],
)
def test_bad_fact_files_fail_in_one_line(tmp_path: Path, change: dict, message: str) -> None:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps({**FACTS, **change}))
    with pytest.raises((DataError, ConfigError), match=message):
        load_facts(str(path))


def test_fact_csv_files_fail_in_one_line(tmp_path: Path) -> None:
    templates = tmp_path / "templates.json"
    templates.write_text(json.dumps(FACTS["templates"]))
    path = tmp_path / "facts.csv"
    path.write_text("subject,relation,object,object\nFrance,capital,Paris,Lyon\n")
    with pytest.raises(DataError, match="column 'object' appears more than once"):
        load_facts(str(path), str(templates))
    path.write_bytes("subject,relation,object\nP\u00e9rou,capital,Lima\n".encode("latin-1"))
    with pytest.raises(DataError, match="not UTF-8 text"):
        load_facts(str(path), str(templates))
    path.write_text('subject,relation,object\n"Peru\nof old",capital,Lima\n')
    assert load_facts(str(path), str(templates)).facts[0].subject == "Peru\nof old"
    with pytest.raises(DataError, match="is a folder, not a file"):
        load_facts(str(path), str(tmp_path))


def test_unknown_relation_names_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(FACTS))
    with pytest.raises(DataError, match="relations: capital"):
        load_facts(str(path)).of_relation("currency")


def test_builtin_countries() -> None:
    facts = load_facts("builtin:countries")
    assert set(facts.relations) == {"capital", "region", "subregion", "currency", "language"}
    assert all(len(t) >= 3 for t in TEMPLATES.values())
    capitals = facts.of_relation("capital").facts
    assert len(capitals) > 200
    assert Fact("France", "capital", "Paris") in capitals
    assert Fact("France", "currency", "euro") in facts.facts
    assert Fact("France", "language", "French") in facts.facts
    assert country_facts({"name": "X", "capital": "", "currencies": ["ZZZ"]}) == []


def test_known_facts_and_scores() -> None:
    lm = tiny_lm("llama")
    facts = load_facts("builtin:countries").of_relation("capital")
    kept, checked = known_facts(lm, facts, min_fraction=0.0, limit=3, progress=False)
    assert checked == 3 and len(kept.facts) == 3
    none, _ = known_facts(lm, facts.with_facts(facts.facts[:3]), min_fraction=1.1, progress=False)
    assert none.facts == []
    score = score_answer(lm, "The capital of [X] is [Y]", "France", "Buenos Aires")
    assert score.num_tokens == 2 and 0 < score.probability < 1
    assert perplexity(lm, facts, facts.facts[:2]) > 1

"""Preference data made from `countries-qa` (`adaptlab.data.countries_qa`), in its split by
country and its prompts (`cued`: the question, then a line `Answer:`):

- `countries-qa-pairs`: each question with its right answer chosen and, rejected, the answer
  another country of the same split gives to the same relation (the capital of Y against the
  capital of X), picked with a fixed seed and never equal to the right one under exact match's
  normalisation. A question whose relation no other country of its split answers differently
  is left out.
- `countries-qa-unpaired`: each pair as two judged answers (KTO): the chosen desirable, the
  rejected not.
- `countries-qa-questions`: each question with its answer as the reference (GRPO).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from functools import lru_cache
from pathlib import Path

from adaptlab.data.builtin import package_files
from adaptlab.data.countries_qa import NAME as COUNTRIES
from adaptlab.data.countries_qa import (
    PIP,
    QUESTIONS,
    country_records,
    country_relations,
    load_countries_qa,
)
from adaptlab.data.generative import GenerativeCorpus, PromptCompletion, cued
from adaptlab.data.preference import (
    PAIR_SEED,
    Judged,
    Preference,
    PreferenceCorpus,
    Question,
    built_pairs,
    pick_other,
)
from adaptlab.data.types import SPLIT_NAMES, Origin
from adaptlab.errors import DataError

PAIRS = f"{COUNTRIES}-pairs"
UNPAIRED = f"{COUNTRIES}-unpaired"
QUESTIONS_NAME = f"{COUNTRIES}-questions"

TEACHES = (
    "teaches preferring a country's own fact over the same kind of fact of another country "
    "(the right capital over another capital); it does not teach the form of an answer (both "
    "are short names of the right kind) nor anything about countries outside training, whose "
    "facts are in dev and test only"
)
PAIRS_SUMMARY = (
    "countries-qa questions, the right answer chosen and another country's answer to the same "
    "relation rejected, split by country: teaches a country's own fact over another's, not "
    "the form of an answer"
)
UNPAIRED_SUMMARY = (
    "countries-qa-pairs as judged answers (KTO), the right answer desirable and the other "
    "country's not: teaches and misses what the pairs do"
)
QUESTIONS_SUMMARY = (
    "countries-qa questions with their answer as the reference, for a verifiable reward "
    "(GRPO); split by country"
)


def relation_of(country: str, prompt: str) -> str | None:
    """Which relation `prompt` asks of `country` (None: no phrasing of QUESTIONS writes it)."""
    for relation, templates in QUESTIONS.items():
        for template in templates:
            if cued(template.format(country=country), "").prompt == prompt:
                return relation
    return None


def countries_pairs(
    corpus: GenerativeCorpus, records: Mapping[str, Mapping[str, object]]
) -> PreferenceCorpus:
    """`countries-qa-pairs` from the countries-qa corpus and the countryinfo records (by file
    name) its origins name."""
    found = corpus.origins
    if found is None:
        raise DataError(f"{COUNTRIES} lost its origins; {PAIRS} needs them to find each country")

    def pairs_of(split: str, rng: random.Random) -> Iterator[tuple[Preference, Origin | None]]:
        asked = list(zip(corpus.splits[split], found[split], strict=True))
        facts = [_fact(example, origin, records) for example, origin in asked]
        pools: dict[str, set[str]] = {}
        for _, _, relation, value in facts:
            pools.setdefault(relation, set()).add(value)
        ordered = {relation: sorted(values) for relation, values in pools.items()}
        for example, origin, relation, value in facts:
            wrong = pick_other(rng, value, ordered[relation])
            if wrong is not None:
                yield Preference(example.prompt, example.completion, f" {wrong}"), origin

    splits, origins = built_pairs(pairs_of)
    description = (
        f"built-in {PAIRS}: {corpus.description}; each question's answer chosen and another "
        f"country's answer to the same relation in the same split rejected (picked with seed "
        f"{PAIR_SEED}, never equal to the right one); {TEACHES}"
    )
    return PreferenceCorpus(PAIRS, splits, description, origins)


def _fact(
    example: object, origin: Origin | None, records: Mapping[str, Mapping[str, object]]
) -> tuple[PromptCompletion, Origin | None, str, str]:
    """A countries-qa question with its origin, relation and answer."""
    example = _asked(example)
    if origin is None or origin.file not in records:
        raise DataError(f"{PAIRS} cannot trace {example.prompt!r} of {COUNTRIES} to a country")
    info = records[origin.file]
    country = str(info.get("name") or "").strip()
    relation = relation_of(country, example.prompt)
    if relation is None:
        raise DataError(f"{PAIRS}: no phrasing about {country} writes {example.prompt!r}")
    return example, origin, relation, country_relations(info)[relation]


def _asked(example: object) -> PromptCompletion:
    """A countries-qa example, which is a prompt-completion pair."""
    if not isinstance(example, PromptCompletion):
        raise DataError(f"{COUNTRIES} holds {example!r}, not a question and its answer")
    return example


def unpaired(pairs: PreferenceCorpus) -> PreferenceCorpus:
    """`countries-qa-unpaired`: each pair as its chosen answer, desirable, then its rejected
    one, not."""
    splits: dict[str, tuple[Judged, ...]] = {}
    origins: dict[str, tuple[Origin | None, ...]] = {}
    for split in SPLIT_NAMES:
        judged: list[Judged] = []
        for pair in pairs.splits[split]:
            assert isinstance(pair, Preference)
            judged += [
                Judged(pair.prompt, pair.chosen, True),
                Judged(pair.prompt, pair.rejected, False),
            ]
        splits[split] = tuple(judged)
        kept = pairs.origins[split] if pairs.origins else (None,) * len(pairs.splits[split])
        origins[split] = tuple(origin for origin in kept for _ in range(2))
    description = (
        f"built-in {UNPAIRED}: the pairs of {PAIRS} as judged answers, the chosen desirable and "
        f"the rejected not (two rows a pair); {TEACHES}"
    )
    return PreferenceCorpus(UNPAIRED, splits, description, origins)


def questions(corpus: GenerativeCorpus) -> PreferenceCorpus:
    """`countries-qa-questions`: each question with its answer (no leading space) as the
    reference."""
    splits = {
        split: tuple(
            Question(asked.prompt, asked.completion.strip())
            for asked in map(_asked, corpus.splits[split])
        )
        for split in SPLIT_NAMES
    }
    description = (
        f"built-in {QUESTIONS_NAME}: the questions of {corpus.description}, each answer the "
        "reference a verifiable reward compares against"
    )
    return PreferenceCorpus(QUESTIONS_NAME, splits, description, corpus.origins)


@lru_cache(maxsize=1)
def _cached_pairs(folder: Path) -> PreferenceCorpus:
    """The pairs made once per process from the package's data folder."""
    return countries_pairs(load_countries_qa(), dict(country_records(folder)))


def load_countries_pairs() -> PreferenceCorpus:
    """`countries-qa-pairs` from the installed countryinfo package."""
    (folder,) = package_files(PAIRS, "countryinfo", PIP, ("data",))
    return _cached_pairs(folder)


def load_countries_unpaired() -> PreferenceCorpus:
    """`countries-qa-unpaired` from the installed countryinfo package."""
    return unpaired(load_countries_pairs())


def load_countries_questions() -> PreferenceCorpus:
    """`countries-qa-questions` from the installed countryinfo package."""
    return questions(load_countries_qa())

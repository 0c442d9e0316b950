"""The hf: source with a stand-in `datasets` module (no network, no package needed)."""

import sys
from types import SimpleNamespace
from typing import Any

import pytest

from adaptlab.data import load_dataset
from adaptlab.errors import DataError
from adaptlab.tasks.registry import LABELLED


class ClassLabel:
    """Stands in for datasets.ClassLabel: ids to names."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def int2str(self, value: int) -> str:
        if not 0 <= value < len(self.names):
            raise ValueError(f"invalid class id {value}")
        return self.names[value]


class Split(list[dict[str, Any]]):
    """Stands in for datasets.Dataset: an iterable of records with `features`."""

    features = {"label": ClassLabel(["neg", "pos"])}


def fake_datasets(result: Any) -> SimpleNamespace:
    """A `datasets` module whose load_dataset returns `result`, or raises it if an error."""

    def load(name: str, config: str | None) -> Any:
        if isinstance(result, Exception):
            raise result
        return result

    return SimpleNamespace(load_dataset=load)


def test_hf_source_without_datasets_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(DataError) as error:
        load_dataset("hf:imdb", LABELLED)
    assert "\n" not in str(error.value)
    assert "pip install datasets" in str(error.value)


def test_hf_load_failure_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    offline = ConnectionError("Couldn't reach the Hub\n(details)")
    monkeypatch.setitem(sys.modules, "datasets", fake_datasets(offline))
    with pytest.raises(DataError) as error:
        load_dataset("hf:imdb:plain_text", LABELLED)
    message = str(error.value)
    assert message.startswith("cannot load Hugging Face dataset 'imdb:plain_text'")
    assert "Couldn't reach the Hub" in message
    assert "\n" not in message


def test_hf_class_ids_become_names(monkeypatch: pytest.MonkeyPatch) -> None:
    train = Split({"text": f"review {i}", "label": i % 2} for i in range(20))
    test = Split([{"text": "fine", "label": 1}, {"text": "bad", "label": 0}])
    monkeypatch.setitem(sys.modules, "datasets", fake_datasets({"train": train, "test": test}))
    data = load_dataset("hf:imdb", LABELLED)
    assert data.label_names == ("neg", "pos")
    assert [example.label for example in data.splits["test"]] == [1, 0]
    assert len(data.splits["train"]) + len(data.splits["dev"]) == 20


def test_hf_unlabelled_split_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    train = Split({"text": f"review {i}", "label": i % 2} for i in range(20))
    test = Split([{"text": "hidden", "label": -1}])
    monkeypatch.setitem(sys.modules, "datasets", fake_datasets({"train": train, "test": test}))
    with pytest.raises(DataError, match=r"test row 1 has label -1, which is no class"):
        load_dataset("hf:glue:sst2", LABELLED)

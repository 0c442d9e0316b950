"""Seeded stratified splits and the low-resource protocol (He et al. 2021, §3.2)."""

from collections import Counter
from fractions import Fraction

import pytest

from adaptlab.data import Dataset, Example, describe, low_resource
from adaptlab.data.splits import stratified_split, systematic_pick, three_way_split
from adaptlab.errors import ConfigError, DataError
from adaptlab.tasks.registry import get_task

SINGLE = get_task("single_label")
"""The task `make_dataset`'s data sets are of, unless it is given another."""


def make_dataset(train_count: int, task: str = "single_label") -> Dataset:
    """A dataset whose training texts are unique, labels cycling over three classes."""
    if task == "token":
        train = tuple(Example(text=(f"w{i}", "x"), label=(i % 3, 0)) for i in range(train_count))
        names: tuple[str, ...] = ("O", "B-a", "I-a")
    else:
        train = tuple(Example(text=f"t{i}", label=i % 3) for i in range(train_count))
        names = ("a", "b", "c")
    test = (Example(text="held out", label=0),)
    return Dataset(
        name="toy",
        task=task,  # type: ignore[arg-type]
        label_names=names,
        splits={"train": train, "dev": train[:1], "test": test},
        description="toy data.",
    )


def test_systematic_pick_takes_an_exact_evenly_spread_share() -> None:
    picked, rest = systematic_pick(list(range(100)), Fraction(1, 10))
    assert picked == [9, 19, 29, 39, 49, 59, 69, 79, 89, 99]
    assert len(rest) == 90
    picked, _ = systematic_pick(list(range(7)), Fraction(3, 7))
    assert len(picked) == 3


def test_three_way_split_keeps_every_label_in_train() -> None:
    keys = ["common"] * 30 + ["rare"]
    train, dev, test = three_way_split(keys)
    assert 30 in train
    assert sorted(train + dev + test) == list(range(31))
    assert (len(train), len(dev), len(test)) == (26, 3, 2)


def test_stratified_split_depends_on_seed_only() -> None:
    keys = [i % 4 for i in range(200)]
    first = stratified_split(keys, 5, Fraction(1, 5), Fraction(1, 2))
    assert first == stratified_split(keys, 5, Fraction(1, 5), Fraction(1, 2))
    assert first != stratified_split(keys, 6, Fraction(1, 5), Fraction(1, 2))
    dev_labels = Counter(keys[i] for i in first[1])
    assert set(dev_labels.values()) <= {4, 5, 6}


def test_low_resource_sizes_disjoint_and_test_kept() -> None:
    data = make_dataset(300)
    small = low_resource(data, SINGLE, 30, seed=1)
    train, dev = small.splits["train"], small.splits["dev"]
    assert (len(train), len(dev)) == (30, 30)
    assert not {e.text for e in train} & {e.text for e in dev}
    assert set(train) | set(dev) <= set(data.splits["train"])
    assert small.splits["test"] == data.splits["test"]
    assert Counter(e.label for e in train) == {0: 10, 1: 10, 2: 10}
    assert "30 train examples sampled with seed 1" in small.description
    assert small.label_names == data.label_names


def test_low_resource_is_deterministic_per_seed() -> None:
    data = make_dataset(300)
    assert low_resource(data, SINGLE, 20, seed=3) == low_resource(data, SINGLE, 20, seed=3)
    assert (
        low_resource(data, SINGLE, 20, seed=3).splits["train"]
        != low_resource(data, SINGLE, 20, seed=4).splits["train"]
    )


def test_low_resource_dev_uses_what_remains() -> None:
    small = low_resource(make_dataset(100), SINGLE, 90, seed=0)
    assert (len(small.splits["train"]), len(small.splits["dev"])) == (90, 10)


def test_low_resource_dev_size_option() -> None:
    small = low_resource(make_dataset(100), SINGLE, 50, seed=0, dev_size=10)
    assert (len(small.splits["train"]), len(small.splits["dev"])) == (50, 10)


def test_low_resource_token_task() -> None:
    small = low_resource(make_dataset(60, task="token"), get_task("token"), 12, seed=2)
    assert len(small.splits["train"]) == 12
    # sentences with an entity (first tag not O) are 2/3 of the data, so 8 of 12
    assert sum(e.label[0] != 0 for e in small.splits["train"]) == 8  # type: ignore[index]


def test_low_resource_errors() -> None:
    data = make_dataset(50)
    with pytest.raises(DataError) as error:
        low_resource(data, SINGLE, 51, seed=0)
    assert "51" in str(error.value)
    assert "50" in str(error.value)
    with pytest.raises(DataError, match="no examples for dev"):
        low_resource(data, SINGLE, 50, seed=0)
    with pytest.raises(ConfigError, match="at least 1"):
        low_resource(data, SINGLE, 0, seed=0)
    with pytest.raises(ConfigError, match="dev_size"):
        low_resource(data, SINGLE, 5, seed=0, dev_size=0)


def test_describe_is_json_ready() -> None:
    summary = describe(make_dataset(9))
    assert summary["splits"]["train"] == {"size": 9, "labels": {"a": 3, "b": 3, "c": 3}}
    assert summary["splits"]["test"]["labels"] == {"a": 1, "b": 0, "c": 0}
    assert summary["examples"] == [{"text": "t0", "label": "a"}, {"text": "t1", "label": "b"}]
    token = describe(make_dataset(3, task="token"))
    assert token["examples"][1] == {"text": ["w1", "x"], "label": ["B-a", "O"]}
    assert token["splits"]["train"]["labels"] == {"O": 4, "B-a": 1, "I-a": 1}


def test_the_package_reads_and_samples_for_the_data_sets_own_task() -> None:
    import adaptlab

    data = make_dataset(300)
    assert adaptlab.low_resource(data, 20, seed=3) == low_resource(data, SINGLE, 20, seed=3)
    reviews = adaptlab.load_dataset("rotten-tomatoes")
    assert reviews.task == "single_label" and reviews.label_names == ("fresh", "rotten")
    with pytest.raises(ConfigError, match="unknown task 'poetry'"):
        adaptlab.load_dataset("rotten-tomatoes", task="poetry")

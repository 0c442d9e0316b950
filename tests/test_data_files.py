"""Loading CSV/TSV/JSONL/BIO files and split folders: task inference, labels, splits, errors."""

import json
from pathlib import Path

import pytest

from adaptlab.data import load_dataset
from adaptlab.errors import ConfigError, DataError
from adaptlab.tasks.registry import LABELLED


def write_csv(path: Path, header: str, rows: list[str]) -> Path:
    """Write a small CSV file and return its path."""
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def binary_rows(count: int) -> list[str]:
    """`count` rows alternating the labels pos and neg, each text unique."""
    return [f"text number {i},{'pos' if i % 2 else 'neg'}" for i in range(count)]


def one_line_error(error: pytest.ExceptionInfo[Exception]) -> str:
    """The message of a raised error, checked to be a single line."""
    message = str(error.value)
    assert "\n" not in message
    return message


def test_csv_single_label_split_80_10_10_stratified(tmp_path: Path) -> None:
    data = load_dataset(
        str(write_csv(tmp_path / "reviews.csv", "text,label", binary_rows(50))), LABELLED
    )
    assert data.name == "reviews"
    assert data.task == "single_label"
    assert data.label_names == ("neg", "pos")
    # 50 rows, one per label kept in train, then 9 of the other 48 held out: 5 dev, 4 test.
    sizes = {split: len(examples) for split, examples in data.splits.items()}
    assert sizes == {"train": 41, "dev": 5, "test": 4}
    for split in ("dev", "test"):
        assert {example.label for example in data.splits[split]} == {0, 1}
    texts = [example.text for examples in data.splits.values() for example in examples]
    assert len(set(texts)) == 50
    assert "train 41, dev 5, test 4" in data.description


def test_single_file_split_is_fixed(tmp_path: Path) -> None:
    path = str(write_csv(tmp_path / "a.csv", "text,label", binary_rows(40)))
    first, second = load_dataset(path, LABELLED), load_dataset(path, LABELLED)
    assert first.splits["test"] == second.splits["test"]
    assert first.splits["dev"] == second.splits["dev"]


def test_tsv_with_custom_columns_and_text_pair(tmp_path: Path) -> None:
    rows = [f"premise {i}\thypothesis {i}\t{('yes', 'no')[i % 2]}" for i in range(30)]
    path = tmp_path / "pairs.tsv"
    path.write_text("\n".join(["sentence1\tsentence2\tgold", *rows]), encoding="utf-8")
    data = load_dataset(
        str(path),
        LABELLED,
        text_column="sentence1",
        text_pair_column="sentence2",
        label_column="gold",
    )
    example = data.splits["train"][0]
    assert isinstance(example.text, str)
    assert example.text.startswith("premise ")
    assert example.text_pair == example.text.replace("premise", "hypothesis")
    assert data.label_names == ("no", "yes")


def test_multi_label_from_separator_and_from_json_lists(tmp_path: Path) -> None:
    cells = ["sports|politics", "sports", "politics|tech", "tech"] * 10
    csv_path = write_csv(
        tmp_path / "m.csv", "text,label", [f"t{i},{c}" for i, c in enumerate(cells)]
    )
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text(
        "\n".join(json.dumps({"text": f"t{i}", "label": c.split("|")}) for i, c in enumerate(cells))
    )
    for path in (csv_path, jsonl):
        data = load_dataset(str(path), LABELLED)
        assert data.task == "multi_label"
        assert data.label_names == ("politics", "sports", "tech")
        labels = {example.text: example.label for s in data.splits.values() for example in s}
        assert labels["t0"] == (0, 1)
        assert labels["t2"] == (0, 2)
        assert labels["t3"] == (2,)


def test_decimal_labels_infer_regression(tmp_path: Path) -> None:
    rows = [f"sentence {i},{i / 10}" for i in range(30)]
    data = load_dataset(str(write_csv(tmp_path / "r.csv", "text,label", rows)), LABELLED)
    assert data.task == "regression"
    assert data.label_names == ()
    values = sorted(example.label for s in data.splits.values() for example in s)
    assert values == [i / 10 for i in range(30)]


def test_integer_labels_sort_by_value_and_stay_classes(tmp_path: Path) -> None:
    rows = [f"sentence {i},{(1, 2, 10)[i % 3]}" for i in range(45)]
    data = load_dataset(str(write_csv(tmp_path / "c.csv", "text,label", rows)), LABELLED)
    assert data.task == "single_label"
    assert data.label_names == ("1", "2", "10")


def test_blank_text_rows_are_dropped(tmp_path: Path) -> None:
    rows = [*binary_rows(30), " ,pos", ",neg"]
    data = load_dataset(str(write_csv(tmp_path / "b.csv", "text,label", rows)), LABELLED)
    assert sum(len(examples) for examples in data.splits.values()) == 30


def write_bio(path: Path, sentences: int) -> Path:
    """A CoNLL-style BIO file with a -DOCSTART- line and `sentences` sentences."""
    blocks = ["-DOCSTART- O", ""]
    for i in range(sentences):
        tagged = i % 2 == 0
        blocks += [f"Alice\t{'B-person' if tagged else 'O'}", "visited\tO", f"Paris{i}\tB-loc", ""]
    path.write_text("\n".join(blocks), encoding="utf-8")
    return path


def test_bio_file_gives_token_task_with_o_first(tmp_path: Path) -> None:
    data = load_dataset(str(write_bio(tmp_path / "ner.conll", 30)), LABELLED)
    assert data.task == "token"
    assert data.label_names == ("O", "B-loc", "B-person")
    assert sum(len(examples) for examples in data.splits.values()) == 30
    labels = {example.text: example.label for s in data.splits.values() for example in s}
    assert labels[("Alice", "visited", "Paris0")] == (2, 0, 1)
    assert labels[("Alice", "visited", "Paris1")] == (0, 0, 1)


def test_jsonl_word_lists_give_token_task(tmp_path: Path) -> None:
    path = tmp_path / "ner.jsonl"
    lines = [{"tokens": ["Ann", f"w{i}"], "tags": ["B-per", "O"]} for i in range(20)]
    path.write_text("\n".join(json.dumps(line) for line in lines))
    data = load_dataset(str(path), LABELLED, text_column="tokens", label_column="tags")
    assert data.task == "token"
    assert data.label_names == ("O", "B-per")
    assert all(example.label == (1, 0) for example in data.splits["train"])
    path.write_text(json.dumps({"tokens": ["Ann", "x"], "tags": ["O"]}))
    with pytest.raises(DataError, match="has 2 words but 1 tags"):
        load_dataset(str(path), LABELLED, text_column="tokens", label_column="tags")


def test_folder_with_train_and_test_carves_dev(tmp_path: Path) -> None:
    write_csv(tmp_path / "train.csv", "text,label", binary_rows(42))
    write_csv(tmp_path / "test.csv", "text,label", binary_rows(6))
    data = load_dataset(str(tmp_path), LABELLED)
    assert data.name == tmp_path.name
    assert len(data.splits["test"]) == 6
    # 42 rows, one per label kept, 10% of the other 40 carved out as dev.
    assert (len(data.splits["train"]), len(data.splits["dev"])) == (38, 4)
    assert "dev carved as 10% of train" in data.description


def test_folder_with_dev_file_uses_it_as_given(tmp_path: Path) -> None:
    write_csv(tmp_path / "train.csv", "text,label", binary_rows(20))
    write_csv(tmp_path / "dev.csv", "text,label", binary_rows(4))
    (tmp_path / "test.jsonl").write_text('{"text": "x", "label": "pos"}\n')
    data = load_dataset(str(tmp_path), LABELLED)
    assert [len(data.splits[s]) for s in ("train", "dev", "test")] == [20, 4, 1]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError) as error:
        load_dataset(str(tmp_path / "nope.csv"), LABELLED)
    assert "not found" in one_line_error(error)
    assert "nope.csv" in str(error.value)


@pytest.mark.parametrize("content", ["", "text,label\n", "text,label\n  ,pos\n"])
def test_file_without_data_rows(tmp_path: Path, content: str) -> None:
    path = tmp_path / "empty.csv"
    path.write_text(content)
    with pytest.raises(DataError) as error:
        load_dataset(str(path), LABELLED)
    assert "no data rows" in one_line_error(error)


def test_empty_jsonl_and_bio_files(tmp_path: Path) -> None:
    for name in ("e.jsonl", "e.txt"):
        (tmp_path / name).write_text("\n\n")
        with pytest.raises(DataError, match="no data rows"):
            load_dataset(str(tmp_path / name), LABELLED)


def test_missing_column_names_it_and_lists_columns(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "c.csv", "sentence,label", binary_rows(10))
    with pytest.raises(DataError) as error:
        load_dataset(str(path), LABELLED)
    message = one_line_error(error)
    assert "column 'text'" in message
    assert "sentence, label" in message
    with pytest.raises(DataError, match="column 'gold'"):
        load_dataset(str(path), LABELLED, text_column="sentence", label_column="gold")
    with pytest.raises(DataError, match="column 'other'"):
        load_dataset(str(path), LABELLED, text_column="sentence", text_pair_column="other")


def test_missing_jsonl_key(tmp_path: Path) -> None:
    path = tmp_path / "k.jsonl"
    path.write_text('{"sentence": "a", "label": "x"}\n')
    with pytest.raises(DataError, match=r"column 'text' not found in .*line 1 .*sentence, label"):
        load_dataset(str(path), LABELLED)


def test_bytes_that_are_not_utf8_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin.csv"
    path.write_bytes(b"text,label\nfine,pos\ncaf\xe9 au lait,neg\n")
    with pytest.raises(DataError) as error:
        load_dataset(str(path), LABELLED)
    assert "line 3 is not UTF-8" in one_line_error(error)


def test_test_label_never_seen_in_training(tmp_path: Path) -> None:
    write_csv(tmp_path / "train.csv", "text,label", binary_rows(20))
    write_csv(tmp_path / "test.csv", "text,label", ["odd one,maybe"])
    with pytest.raises(DataError) as error:
        load_dataset(str(tmp_path), LABELLED)
    message = one_line_error(error)
    assert "'maybe'" in message
    assert "test split" in message


def test_dev_without_test_is_refused(tmp_path: Path) -> None:
    write_csv(tmp_path / "train.csv", "text,label", binary_rows(20))
    write_csv(tmp_path / "dev.csv", "text,label", binary_rows(4))
    with pytest.raises(DataError, match=f"{tmp_path.name} has a dev split but no test split"):
        load_dataset(str(tmp_path), LABELLED)


def test_unknown_extension(tmp_path: Path) -> None:
    path = tmp_path / "data.xlsx"
    path.write_bytes(b"PK")
    with pytest.raises(DataError) as error:
        load_dataset(str(path), LABELLED)
    message = one_line_error(error)
    assert "'.xlsx'" in message
    assert ".csv" in message


def test_unknown_builtin_lists_the_builtins() -> None:
    with pytest.raises(DataError) as error:
        load_dataset("rotten_tomatoes", LABELLED)
    message = one_line_error(error)
    assert "'rotten_tomatoes'" in message
    assert "rotten-tomatoes" in message
    assert "wnut16-ner" in message


def test_bad_bio_line_names_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text("Alice\tB-person\nParis\tLOCATION\n")
    with pytest.raises(DataError, match=r"line 2: expected a word and a BIO tag"):
        load_dataset(str(path), LABELLED)


def test_regression_task_needs_numbers(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "r.csv", "text,label", ["a,0.5", "b,high"])
    with pytest.raises(DataError, match=r"r.csv line 3: label 'high' is not a number"):
        load_dataset(str(path), LABELLED, task="regression")


def test_single_label_training_split_needs_two_labels(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "one.csv", "text,label", [f"t{i},pos" for i in range(20)])
    with pytest.raises(DataError, match="needs at least 2"):
        load_dataset(str(path), LABELLED)


def test_bad_options_are_config_errors(tmp_path: Path) -> None:
    path = str(write_csv(tmp_path / "a.csv", "text,label", binary_rows(20)))
    with pytest.raises(ConfigError, match="unknown task 'ner'"):
        load_dataset(path, LABELLED, task="ner")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="label_separator"):
        load_dataset(path, LABELLED, label_separator="")

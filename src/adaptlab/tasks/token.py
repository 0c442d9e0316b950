"""Token classification: one BIO tag per word (named entities), the label on each word's first
word piece only, scored by span F1 over entities (exact type and boundary, as conlleval) and
token accuracy. A class is an entity type and its examples are entity spans."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.data.encoding import IGNORE_INDEX, padded
from adaptlab.errors import DataError
from adaptlab.tasks.classes import ClassCounts, class_counts
from adaptlab.tasks.labelled import LabelledTask
from adaptlab.tasks.registry import register_task
from adaptlab.tasks.single_label import class_id

if TYPE_CHECKING:
    import torch

    from adaptlab.data.labels import ParsedLabel
    from adaptlab.data.readers import RawRow
    from adaptlab.data.types import Example
    from adaptlab.tasks.prediction import Prediction


class TokenTagging(LabelledTask):
    """A tag per word, from a softmax over the tags at each word's first piece."""

    name = "token"
    summary = "a BIO tag per word"
    model_kind = "token"
    primary_metric = "span_f1"
    metrics = ("span_f1", "span_precision", "span_recall", "token_accuracy")
    paired_metrics = ("span_f1", "token_accuracy")
    class_unit = "entity spans"
    stratified_by = "stratified by whether a sentence has entities"
    guess_order = 0
    word_level = True

    def recognises(self, rows: Sequence[RawRow], separator: str) -> bool:
        return any(isinstance(row.text, tuple) for row in rows)

    def parse_label(self, row: RawRow, separator: str) -> ParsedLabel:
        if not isinstance(row.text, tuple) or not isinstance(row.label, tuple):
            raise DataError(
                f"{row.where}: token tasks need words with one tag each "
                "(a BIO .txt/.conll file, or JSONL with word and tag lists)"
            )
        if len(row.text) != len(row.label):
            raise DataError(
                f"{row.where} has {len(row.text)} words but {len(row.label)} tags; "
                "give one tag per word"
            )
        return row.label

    def label_order(self, names: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted(set(names), key=_bio_key))

    def label_value(self, label: ParsedLabel, index: Mapping[str, int]) -> tuple[int, ...]:
        assert isinstance(label, tuple)
        return tuple(index[tag] for tag in label)

    def stratum(self, label: Hashable, outside: Hashable) -> Hashable:
        if isinstance(label, tuple):
            return any(tag != outside for tag in label)
        return label

    def placeholder(self, text: str) -> Example:
        from adaptlab.data.types import Example

        words = tuple(text.split())
        return Example(text=words, label=(0,) * len(words))

    def target(self, label: Any, label_count: int) -> int:
        """A word's tag id."""
        return class_id(label, label_count)

    def label_tensor(self, labels: list[Any], longest: int, left: bool) -> torch.Tensor:
        import torch

        rows = [padded(label, longest, IGNORE_INDEX, left) for label in labels]
        return torch.tensor(rows, dtype=torch.long)

    def loss_terms(self, labels: torch.Tensor, examples: int) -> int:
        """Tagged tokens: the model's loss is their mean."""
        return int(labels.ne(IGNORE_INDEX).sum())

    def scores(
        self, outputs: np.ndarray, labels: np.ndarray, label_names: Sequence[str]
    ) -> dict[str, float]:
        return token_metrics(outputs.argmax(-1), labels, label_names)

    def class_names(self, label_names: Sequence[str]) -> tuple[str, ...]:
        types = (tag.partition("-")[2] for tag in label_names if tag[:2] in ("B-", "I-"))
        return tuple(dict.fromkeys(types))

    def training_counts(
        self, examples: Sequence[Example], label_names: Sequence[str]
    ) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for example in examples:
            tags = [label_names[i] for i in example.label]  # type: ignore[union-attr]
            counts.update(kind for _, _, kind in bio_spans(tags))
        return {name: counts[name] for name in self.class_names(label_names)}

    def evaluated_counts(
        self, outputs: np.ndarray, labels: np.ndarray, label_names: Sequence[str]
    ) -> tuple[ClassCounts, ...]:
        names = self.class_names(label_names)
        gold, predicted = entity_spans(outputs.argmax(-1), labels, label_names)
        right = gold & predicted
        return class_counts(
            names, _per_type(gold, names), _per_type(predicted, names), _per_type(right, names)
        )

    def prediction(
        self, text: str, logits: torch.Tensor, marks: torch.Tensor, label_names: Sequence[str]
    ) -> Prediction:
        from adaptlab.tasks.prediction import Prediction

        first_pieces = logits[marks != IGNORE_INDEX].softmax(-1)
        words = text.split()[: len(first_pieces)]
        tags = [label_names[int(i)] for i in first_pieces.argmax(-1)]
        return Prediction(text, tags, [float(p) for p in first_pieces.max(-1).values], words=words)


def _bio_key(tag: str) -> tuple[int, str, str]:
    """Sort O first, then entity types alphabetically with B- before I-."""
    return (0, "", "") if tag == "O" else (1, tag[2:], tag[:2])


def _per_type(spans: set[Span], names: Sequence[str]) -> list[int]:
    found = Counter(kind for *_, kind in spans)
    return [found[name] for name in names]


def token_metrics(
    predicted: np.ndarray, gold: np.ndarray, label_names: Sequence[str]
) -> dict[str, float]:
    """Span precision / recall / F1 over BIO entities, and token accuracy; -100 is ignored."""
    gold_spans, predicted_spans = entity_spans(predicted, gold, label_names)
    correct_tokens = counted_tokens = 0
    for pred_row, gold_row in zip(predicted, gold, strict=True):
        keep = gold_row != -100
        correct_tokens += int((pred_row[keep] == gold_row[keep]).sum())
        counted_tokens += int(keep.sum())
    hits = len(gold_spans & predicted_spans)
    precision = hits / len(predicted_spans) if predicted_spans else 0.0
    recall = hits / len(gold_spans) if gold_spans else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "span_f1": f1,
        "span_precision": precision,
        "span_recall": recall,
        "token_accuracy": correct_tokens / counted_tokens if counted_tokens else 0.0,
    }


Span = tuple[int, int, int, str]
"""(row, start, end exclusive, entity type) of one entity in a batch of tag rows."""


def entity_spans(
    predicted: np.ndarray, gold: np.ndarray, label_names: Sequence[str]
) -> tuple[set[Span], set[Span]]:
    """Gold and predicted entities of tag-id rows (positions labelled -100 are skipped)."""
    gold_spans: set[Span] = set()
    predicted_spans: set[Span] = set()
    for row, (pred_row, gold_row) in enumerate(zip(predicted, gold, strict=True)):
        keep = gold_row != -100
        gold_spans |= {(row, *span) for span in bio_spans([label_names[i] for i in gold_row[keep]])}
        predicted_spans |= {
            (row, *span) for span in bio_spans([label_names[i] for i in pred_row[keep]])
        }
    return gold_spans, predicted_spans


def bio_spans(tags: Sequence[str]) -> list[tuple[int, int, str]]:
    """(start, end exclusive, type) of each entity; an I- tag after O or another type opens one."""
    spans: list[tuple[int, int, str]] = []
    start, kind = -1, ""
    for i, tag in enumerate([*tags, "O"]):
        prefix, _, tag_type = tag.partition("-")
        continues = prefix == "I" and tag_type == kind and start >= 0
        if start >= 0 and not continues:
            spans.append((start, i, kind))
            start, kind = -1, ""
        if prefix in ("B", "I") and not continues:
            start, kind = i, tag_type
    return spans


TOKEN = register_task(TokenTagging())

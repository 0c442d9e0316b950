"""Packing encoded generative examples into rows, with no attention between examples.

`pack` groups examples into rows of at most `max_length` tokens; `collate_packed` makes a
batch of such rows, each example starting again at position 0 and seeing only itself (see
`adaptlab.engine.packing_attention`), so that every position's logits, the loss and its
gradients are those of the examples padded one per row (`collate_padded`). A batch's keys other
than `labels` are the model's inputs; `labels` go to `adaptlab.engine.lm_loss.next_token_loss`.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Sequence
from typing import Protocol

import torch

import adaptlab.checks as checks
from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.engine.packing_attention import FLATTENED, block_causal_mask, checked_attention
from adaptlab.errors import DataError


class Encoded(Protocol):
    """An encoded example: its token ids and, position by position, its labels
    (IGNORE_INDEX where the token is not a target)."""

    @property
    def input_ids(self) -> Sequence[int]: ...

    @property
    def labels(self) -> Sequence[int]: ...


def pack(lengths: Sequence[int], max_length: int) -> list[list[int]]:
    """The indices of `lengths` grouped into rows of at most `max_length` tokens, by best-fit
    decreasing: longest example first, each into the row it leaves the least room in, a new row
    when none has room. Placing tightly keeps the larger gaps for the long examples still to
    come; it fills at least as well as first-fit decreasing in practice (both within 11/9 of the
    fewest rows), and is TRL's default packing. Ties go to the lower index and the lower row,
    so the rows depend only on `lengths`: rows in the order they were opened, indices ascending
    within a row."""
    checks.positive(max_length, "max_length")
    for index, length in enumerate(lengths):
        if not 1 <= length <= max_length:
            raise DataError(
                f"example {index} has {length} tokens; packing takes 1 to max_length "
                f"{max_length} tokens an example (cut examples to max_length when encoding)"
            )
    rows: list[list[int]] = []
    room: list[tuple[int, int]] = []  # (tokens left, row number) of the rows not yet full
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        length = lengths[index]
        at = bisect_left(room, (length, -1))
        if at == len(room):
            left, row = max_length, len(rows)
            rows.append([])
        else:
            left, row = room.pop(at)
        rows[row].append(index)
        if left > length:
            insort(room, (left - length, row))
    return [sorted(row) for row in rows]


def collate_padded(examples: Sequence[Encoded], pad_id: int) -> dict[str, torch.Tensor]:
    """One example a row, right-padded to the longest: `input_ids`, `attention_mask` and
    `labels` (IGNORE_INDEX at pads)."""
    _check_rows([examples])
    width = max(len(e.input_ids) for e in examples)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for row, example in enumerate(examples):
        mask[row, : len(example.input_ids)] = 1
    return {
        "input_ids": _padded([e.input_ids for e in examples], width, pad_id),
        "attention_mask": mask,
        "labels": _padded([e.labels for e in examples], width, IGNORE_INDEX),
    }


def collate_packed(
    rows: Sequence[Sequence[Encoded]], pad_id: int, attention: str
) -> dict[str, torch.Tensor]:
    """A batch of packed rows (each a sequence of examples, as `pack` groups them) for a model
    running `attention` (see `packing_attention`): `input_ids`, `labels` with each example's
    first label IGNORE_INDEX (the last position of the example before does not predict it, as
    nothing predicts an example's first token alone), `position_ids` from 0 in each example,
    and for SDPA / eager the block-diagonal causal `attention_mask` (rows, 1, length, length).
    Rows are right-padded to the longest; the padding is an example of its own, attending to
    itself, so no row of the mask is empty. Flash attention reads packed examples from the
    `position_ids` of a single row only: the rows are joined into one, unpadded, with no mask."""
    checked_attention(attention)
    _check_rows(rows)
    if attention in FLATTENED:
        rows = [[example for row in rows for example in row]]
    ids: list[list[int]] = []
    labels: list[list[int]] = []
    positions: list[list[int]] = []
    segments: list[list[int]] = []
    for row in rows:
        ids.append([t for example in row for t in example.input_ids])
        labels.append([t for example in row for t in (IGNORE_INDEX, *example.labels[1:])])
        positions.append([p for example in row for p in range(len(example.input_ids))])
        segments.append([n for n, e in enumerate(row) for _ in e.input_ids])
    width = max(len(row) for row in ids)
    batch = {
        "input_ids": _padded(ids, width, pad_id),
        "labels": _padded(labels, width, IGNORE_INDEX),
        "position_ids": _padded(positions, width, None),
    }
    if attention not in FLATTENED:
        batch["attention_mask"] = block_causal_mask(_padded(segments, width, -1), attention)
    return batch


def target_tokens(batch: dict[str, torch.Tensor]) -> int:
    """The tokens `batch`'s loss predicts (those `next_token_loss` counts): labels after a
    row's first position that are not IGNORE_INDEX."""
    return int(batch["labels"][:, 1:].ne(IGNORE_INDEX).sum())


def pad_right(rows: Sequence[Sequence[int]], fill: int) -> torch.Tensor:
    """`rows` right-padded with `fill` to the longest."""
    return _padded(rows, max(len(row) for row in rows), fill)


def _padded(rows: Sequence[Sequence[int]], width: int, fill: int | None) -> torch.Tensor:
    """`rows` right-padded to `width` with `fill` (None: positions 0, 1, ..., so that the
    padding reads as one more example)."""
    out = torch.empty((len(rows), width), dtype=torch.long)
    for number, row in enumerate(rows):
        out[number, : len(row)] = torch.tensor(row, dtype=torch.long)
        rest = out[number, len(row) :]
        if fill is None:
            rest.copy_(torch.arange(width - len(row)))
        else:
            rest.fill_(fill)
    return out


def _check_rows(rows: Sequence[Sequence[Encoded]]) -> None:
    """Refuse, in one line, an empty batch, an empty row or an example whose labels do not
    match its ids one for one."""
    if not rows or not all(rows):
        raise DataError("a batch needs at least one example in each row")
    for row in rows:
        for example in row:
            if not example.input_ids or len(example.labels) != len(example.input_ids):
                raise DataError(
                    f"an encoded example has {len(example.input_ids)} token ids and "
                    f"{len(example.labels)} labels; it needs at least one, and one label a token"
                )

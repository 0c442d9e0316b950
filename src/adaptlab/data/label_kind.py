"""What the data layer reads of a task. The tasks sit above the data (a task parses its labels
with `adaptlab.data.labels`, encodes with `adaptlab.data.encoding`), so the data never looks a
task up: whoever reads, samples or encodes labelled data hands it the task (`LabelKind`, which
every `adaptlab.tasks.task.Task` is) or, to read a source whose task a name or its labels say,
the labelled tasks to choose among (`LabelledTasks`: the task registry's
`adaptlab.tasks.registry.LABELLED`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from adaptlab.data.labels import ParsedLabel
    from adaptlab.data.readers import RawRow
    from adaptlab.data.types import LabelValue


class LabelKind(Protocol):
    """A task as labelled data are read, split, sampled and encoded for it (see
    `adaptlab.tasks.task.Task` for what each member means)."""

    @property
    def name(self) -> str: ...

    @property
    def stratified_by(self) -> str: ...

    @property
    def min_labels(self) -> int: ...

    @property
    def named_labels(self) -> bool: ...

    @property
    def word_level(self) -> bool: ...

    def check_guess(self, rows: Sequence[RawRow], label_column: str) -> None: ...

    def parse_label(self, row: RawRow, separator: str) -> ParsedLabel: ...

    def label_order(self, names: Iterable[str]) -> tuple[str, ...]: ...

    def label_value(self, label: ParsedLabel, index: Mapping[str, int]) -> LabelValue: ...

    def stratum(self, label: Hashable, outside: Hashable) -> Hashable: ...

    def target(self, label: LabelValue, label_count: int) -> int | float | list[float]: ...

    def label_tensor(self, labels: list[Any], longest: int, left: bool) -> torch.Tensor: ...


@dataclass(frozen=True)
class LabelledTasks:
    """The labelled tasks a source may be read for, as the task registry hands them down."""

    named: Callable[[str], LabelKind]
    """The labelled task of a name; one line naming the known ones for any other name."""
    guessed: Callable[[Sequence[RawRow], str], LabelKind]
    """The task raw labelled rows (labels split by a separator) look like."""

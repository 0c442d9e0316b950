"""What a task is: one kind of thing a run trains for, and everything that differs between
kinds: how its labels are read, parsed, ordered and stratified; how an example's label becomes
a training target and a batch's labels a tensor; what its loss averages over; its metrics and
the one that judges it; how outputs become predictions; what its classes are; and what a run
of it refuses. Everything else (the epoch loop, the methods, studies, reports, serving) asks
the task and never compares its name.

A task is one object registered by name (`adaptlab.tasks.registry`). Defining one imports no
torch, so records and reports read tasks freely. A task sits below the engine and never imports
it: how a run of it is prepared with the engine sits above, in `adaptlab.runs.preparers`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from adaptlab.errors import ConfigError, DataError

if TYPE_CHECKING:
    import numpy as np
    import torch

    from adaptlab.data.labels import ParsedLabel
    from adaptlab.data.readers import RawRow
    from adaptlab.data.types import Example, LabelValue
    from adaptlab.models.loading import ModelKind
    from adaptlab.tasks.classes import ClassCounts
    from adaptlab.tasks.judging import MetricChoice
    from adaptlab.tasks.prediction import Prediction


class RunAsked(Protocol):
    """What a task checks of a run before any work (`Task.check_run`): a
    `adaptlab.records.spec.RunSpec` is one, named here by what is read of it, since records
    sit above the tasks."""

    @property
    def data_options(self) -> Mapping[str, Any]: ...

    @property
    def fuse(self) -> tuple[str, ...]: ...


def misfit(label: object, task: str) -> DataError:
    """The error for an example's label of another task's shape."""
    return DataError(f"label {label!r} does not fit a {task} task; encode with its task")


class Task:
    """The base of every task: its facts as class attributes, its behaviour as methods.
    A subclass sets the facts and overrides what differs; one instance is registered."""

    name: ClassVar[str]
    """The name runs, records and `--task` use."""
    summary: ClassVar[str]
    """What it trains for, in a few words (help text and listings)."""
    model_kind: ClassVar[ModelKind]
    """The head its model is loaded with (a kind `adaptlab.models.loading` knows)."""
    labelled: ClassVar[bool] = True
    """Whether its data are labelled examples (`load_dataset`); False: unlabelled texts."""
    primary_metric: ClassVar[str]
    """The metric that picks a run's best epoch and, by default, judges methods."""
    metrics: ClassVar[tuple[str, ...]]
    """The metrics where higher is better: those a study may judge methods by."""
    paired_metrics: ClassVar[tuple[str, str]]
    """The two metrics a report shows side by side."""
    class_unit: ClassVar[str | None] = None
    """What a class's count counts in a report ("examples", "entity spans"); None: the task
    has no classes."""
    named_labels: ClassVar[bool] = True
    """Whether an adapter of this task must name its labels (its head's outputs)."""
    min_labels: ClassVar[int] = 1
    """The fewest label names its training split may have."""
    stratified_by: ClassVar[str] = "not stratified"
    """How its splits are stratified, as the data set's description says it."""
    guess_order: ClassVar[int | None] = None
    """Where it stands when a file's task is guessed from its labels (lowest asked first);
    None: only ever asked for by name."""
    generates: ClassVar[bool] = False
    """Whether dev and test generate text to score; its runs take each method's
    `generation_learning_rate`."""
    learning_rate_factor: ClassVar[float] = 1.0
    """What its runs multiply the method's default learning rate by (a given rate is kept)."""
    word_level: ClassVar[bool] = False
    """Whether an example's text is a list of words with one label each."""
    one_class_each: ClassVar[bool] = False
    """Whether each example is predicted exactly one class (a run predicting the same class
    for every example has collapsed)."""
    one_number_each: ClassVar[bool] = False
    """Whether each example's label is one number (what a regression head predicts)."""
    data_marker: ClassVar[str | None] = None
    """What a report adds to the name of a data set this task trained on, so that its runs are
    never grouped with another task's on the same corpus (None: nothing)."""
    data_options: ClassVar[tuple[str, ...]] = ()
    """The data options (besides `task`) a run of it reads: its columns, how it trains and
    generates. Any other is refused in one line (`adaptlab.tasks.unread_options`), never ignored."""
    plain_text: ClassVar[bool] = False
    """Whether it learns plain documents (a language adapter, MAD-X): such an adapter may be
    stacked under an adapter of any task on its base."""

    # --- reading labelled data ------------------------------------------------------------

    def recognises(self, rows: Sequence[RawRow], separator: str) -> bool:
        """Whether raw `rows` look like this task's data (for guessing a file's task)."""
        return False

    def check_guess(self, rows: Sequence[RawRow], label_column: str) -> None:
        """Refuse `rows` (of `label_column`) that were guessed to be this task's but look like
        a mistake (a column of numbers read as classes)."""

    def parse_label(self, row: RawRow, separator: str) -> ParsedLabel:
        """One raw label parsed for this task; a DataError for a label it cannot mean."""
        raise ConfigError(f"task {self.name} reads no labels")

    def label_order(self, names: Iterable[str]) -> tuple[str, ...]:
        """The label names in id order."""
        return tuple(sorted(set(names)))

    def label_value(self, label: ParsedLabel, index: Mapping[str, int]) -> LabelValue:
        """A parsed label as an example holds it, names turned into ids by `index`."""
        assert isinstance(label, str)
        return index[label]

    def stratum(self, label: Hashable, outside: Hashable) -> Hashable:
        """The group a label stratifies by (`outside` is the tag of no entity, for tags)."""
        return label

    def placeholder(self, text: str) -> Example:
        """An unlabelled input (to predict) as an example."""
        from adaptlab.data.types import Example

        return Example(text=text, label=0)

    def input_text(self, text: str, eos_token: str | None) -> str:
        """An input to predict written as the model was trained to read its texts (the text
        itself; a reward model's ends with the EOS text, `eos_token`, as its pairs did)."""
        return text

    # --- encoding ---------------------------------------------------------------------------

    def target(self, label: LabelValue, label_count: int) -> int | float | list[float]:
        """The training target of one example's label (`label_count` outputs)."""
        raise ConfigError(f"task {self.name} has no label targets")

    def label_tensor(self, labels: list[Any], longest: int, left: bool) -> torch.Tensor:
        """A batch's targets as one tensor (`longest` tokens, padded on the left if `left`)."""
        import torch

        return torch.tensor(labels, dtype=torch.float32)

    def loss_terms(self, labels: torch.Tensor, examples: int) -> int:
        """What the model's mean loss over a batch of `examples` is a mean over."""
        return examples

    # --- scores -----------------------------------------------------------------------------

    def scores(
        self, outputs: np.ndarray, labels: np.ndarray, label_names: Sequence[str]
    ) -> dict[str, float]:
        """Every metric of outputs (logits, scores or values) against labels."""
        raise ConfigError(f"task {self.name} scores no outputs")

    def class_names(self, label_names: Sequence[str]) -> tuple[str, ...]:
        """The classes a report counts."""
        return tuple(label_names) if self.class_unit is not None else ()

    def training_counts(
        self, examples: Sequence[Example], label_names: Sequence[str]
    ) -> dict[str, int] | None:
        """Examples per class in a training sample; None for a task without classes."""
        return None

    def evaluated_counts(
        self, outputs: np.ndarray, labels: np.ndarray, label_names: Sequence[str]
    ) -> tuple[ClassCounts, ...] | None:
        """Per class: support, predicted and correct; None for a task without classes."""
        return None

    def choose_metric(self, train_counts: Mapping[str, int] | None) -> MetricChoice:
        """The metric judging runs trained on a sample with `train_counts` per class."""
        from adaptlab.tasks.judging import MetricChoice

        return MetricChoice(self.primary_metric, "the task's primary metric")

    def second_metric(self, metric: str) -> str:
        """The metric shown beside `metric`: the other of the pair, or the pair's first."""
        first, second = self.paired_metrics
        return second if metric == first else first

    # --- predictions ------------------------------------------------------------------------

    def prediction(
        self, text: str, logits: torch.Tensor, marks: torch.Tensor, label_names: Sequence[str]
    ) -> Prediction:
        """One input's prediction from its logits (`marks`: its encoded labels)."""
        raise ConfigError(f"task {self.name} makes no predictions")

    # --- runs -------------------------------------------------------------------------------

    def check_run(self, spec: RunAsked, analysed: bool) -> None:
        """Refuse, before any work, what a run of this task cannot do (`analysed`: an analysis
        follows its training). How a run of it is prepared is not the task's own: the task
        sits below the engine, and `adaptlab.runs.preparers` maps it to its preparer."""


class ScalarTargets(Task):
    """A task whose head has one output trained towards a number: an example's label is that
    number (a placeholder's 0.0)."""

    def placeholder(self, text: str) -> Example:
        from adaptlab.data.types import Example

        return Example(text=text, label=0.0)

    def target(self, label: Any, label_count: int) -> float:
        if isinstance(label, tuple):
            raise misfit(label, self.name)
        return float(label)

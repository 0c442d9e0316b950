"""What `execute` asks of a run whose data are encoded splits it scores whole
(`adaptlab.engine.run_objective.RunObjective`), written once for the generative, preference,
KTO, reward and GRPO runs: the data as the result records them, where each split's examples came
from, no frozen outputs to replay, and the test scored with a sample of its generations."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sized
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Protocol

from adaptlab.data.types import Origin
from adaptlab.engine.run_objective import Tested
from adaptlab.records.generated import SAMPLE_SIZE
from adaptlab.records.result import DataInfo
from adaptlab.records.spec import RunSpec
from adaptlab.records.split_record import SplitRecord
from adaptlab.runs.generative_evaluation import Scored


class EncodedSplits(Protocol):
    """A run's data read and encoded: its name, the splits, what was left out of each, and
    where the examples came from."""

    @property
    def name(self) -> str: ...

    @property
    def splits(self) -> Mapping[str, Any]: ...

    @property
    def dropped(self) -> Mapping[str, int]: ...

    @property
    def origins(self) -> Mapping[str, tuple[Origin | None, ...]] | None: ...


class SplitRun:
    """The record-keeping half of a run over `encoded` splits; the class it is mixed into
    scores a split (`score`) and says how many examples one holds (`split_size`)."""

    spec: RunSpec
    encoded: EncodedSplits
    task: Any  # the run's task, of the kind its objective declares; its `name` is read
    score: Callable[[Any], Scored]  # the objective's: a split scored by the model as it is

    def split_size(self, split: Any) -> int:
        """How many examples a split holds (by default its length)."""
        assert isinstance(split, Sized)
        return len(split)

    @property
    def data(self) -> DataInfo:
        sizes = {name: self.split_size(split) for name, split in self.encoded.splits.items()}
        return DataInfo(
            name=self.encoded.name,
            task=self.task.name,
            labels=(),
            sizes=sizes,
            dropped=dict(self.encoded.dropped),
        )

    @property
    def splits(self) -> SplitRecord:
        return SplitRecord.of(self.spec.data, self.encoded.origins)

    def frozen_replay(self, mode: str, folder: Path | None) -> AbstractContextManager[None]:
        """Nothing to replay: the frozen front's outputs are kept for classifiers only."""
        return nullcontext()

    def test(self) -> Tested:
        scored = self.score(self.encoded.splits["test"])
        generations = scored.generated[:SAMPLE_SIZE] or None
        return Tested(scored.loss, scored.metrics, generations=generations)

"""What each kind of study item, runs (`kind_runs.py`) or sequences (`kind_sequences.py`),
brings to the one `study run` flow (`runner.py`): how its items are planned, the folders they
keep beside the store, what the store keeps of their stages and outcomes, and the lines its
progress adds. Everything else, from the lock to the executor, is the runner's; how one item
executes is the item's own (`planned.Planned`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

from rich.console import Console

from adaptlab.continual.result import StageOutcome
from adaptlab.study.planned import Outcome, Planned, R
from adaptlab.study.progress import StudyProgress
from adaptlab.study.spec import StudySpec
from adaptlab.study.store import ResultStore

P = TypeVar("P", bound=Planned[Any])


class StudyKind(ABC, Generic[P, R]):
    """The study `spec` (read from `spec_folder`) of items `P` giving results `R`, with its
    results store at `store`."""

    changed_files = "the file"
    """What a user restores instead of running again the done items whose data changed."""

    def __init__(self, spec: StudySpec, spec_folder: Path, store: Path) -> None:
        self.spec = spec
        self.spec_folder = spec_folder
        self.store = store

    @property
    def folders(self) -> Path:
        """Where this study's items keep their folders (`folders_beside` its store)."""
        return self.folders_beside(self.store)

    @staticmethod
    @abstractmethod
    def folders_beside(store: Path) -> Path:
        """Where the items of `store` keep their folders, beside it."""

    @abstractmethod
    def plan(self) -> list[P]:
        """The study's items, in grid order (each after those it builds on)."""

    @abstractmethod
    def changed(self, stale: list[P], stored: Mapping[str, str | None]) -> str:
        """What changed under the done items `stale` since they ran (`stored`: the hashes of
        the data they ran on), as the start of the one line refusing them."""

    @abstractmethod
    def reconcile(self, items: list[P], results: ResultStore, states: dict[str, str]) -> None:
        """Make the placed items' folders and the store's `states` agree (a done item whose
        folder is needed but gone is reopened, in the store and in `states`)."""

    @abstractmethod
    def progress(
        self, console: Console, total: int, done_before: int, to_run: int
    ) -> StudyProgress[R]:
        """The progress lines of a session with `to_run` of the `total` items to run."""

    def unready(self, item: P) -> str | None:
        """Why `item` cannot start (None: it can), ahead of the executor."""
        return None

    def resumed(self, item: Planned[R], results: ResultStore) -> int:
        """How many finished stages the started `item` goes on after (the store made to hold
        them); an item without stages starts from the beginning."""
        return 0

    def stage_done(
        self, item: Planned[R], index: int, stage: StageOutcome, results: ResultStore
    ) -> None:
        """Keep stage `index`, which `item` (a sequence) finished, in the store."""
        results.save_stage(item.run_id, index, stage)

    def settled(self, outcome: Outcome[R]) -> None:
        """Act on an outcome the store now holds (it may stop the study in one line)."""

    def closed(self) -> None:
        """Tidy the folders beside the store once the study's session ends."""

"""What one `study run` did, and where its time went (for the overhead benchmark)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptlab.study.planned import Outcome


@dataclass
class StudySummary:
    """What one `study run` did, and where its time went (for the overhead benchmark)."""

    study: str
    store: Path
    planned: int
    done_before: int
    outcomes: list[Outcome[Any]] = field(default_factory=list)
    wall_seconds: float = 0.0
    spent: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    """Seconds in the runner's own steps: 'planning', 'store' (all reads and writes)."""

    @property
    def failed(self) -> list[Outcome[Any]]:
        return [o for o in self.outcomes if o.result is None]

    @property
    def run_seconds(self) -> float:
        """Seconds inside the runs (or sequences) themselves (summed; parallel with Ray)."""
        return sum(o.seconds for o in self.outcomes)


@contextmanager
def timed(spent: defaultdict[str, float], step: str) -> Iterator[None]:
    """Add the seconds the block takes to `spent[step]`."""
    began = time.perf_counter()
    try:
        yield
    finally:
        spent[step] += time.perf_counter() - began

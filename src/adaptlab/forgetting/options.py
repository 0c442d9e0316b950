"""How probes are built (`ProbeOptions`), importing no torch (the command line reads it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_LIMIT = 200
"""Items a probe scores unless told otherwise (a seeded sample where it has more)."""
DEFAULT_WINDOW = 128
"""Tokens per window of a text probe."""


@dataclass(frozen=True)
class ProbeOptions:
    """How probes are built: the most items each scores, the seed of their samples, the tokens
    per text window, the folder of lm-eval task files (None: the built-in probe tasks), and
    the adapted run's task (a data probe encodes its data as the run did)."""

    limit: int = DEFAULT_LIMIT
    seed: int = 0
    window: int = DEFAULT_WINDOW
    include: Path | None = None
    run_task: str | None = None
    batch_size: int = 8

"""Helpers of the sequence-study tests: three learnable stages and a spec over them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from study_helpers import save_spec, write_reviews
from test_continual_sequence import write_stage


def write_stages(folder: Path, rows: int = 60) -> list[str]:
    """Three single-label CSVs (two sentiments and a topic), each learnable in an epoch."""
    return [
        write_stage(folder, "sentiment", rows),
        write_stage(folder, "topic", rows),
        str(write_reviews(folder / "reviews.csv", rows)),
    ]


def write_sequence_spec(folder: Path, model: str, stages: list[str], **keys: Any) -> Path:
    """A sequence study spec in `folder` with small defaults; `keys` add or replace keys."""
    spec = {
        "name": "cl",
        "models": [model],
        "sequence": stages,
        "methods": [{"houlsby": {"hidden_size": 8}}],
        "strategies": ["sequential", {"replay": {"rate": 0.5}}],
        "seeds": [0],
        "epochs": 1,
        "batch_size": 8,
        "learning_rates": [5e-3],
        **keys,
    }
    return save_spec(folder / f"{spec['name']}.yaml", spec)

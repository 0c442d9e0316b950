"""A study's report as a file: rendered from the store's records, written atomically, and
recognised again (a new report may replace only a report)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from adaptlab.fileio import atomic_write
from adaptlab.report.page import GENERATOR, render, render_sequences
from adaptlab.report.records import read_runs, read_validations
from adaptlab.report.view import study_view
from adaptlab.study.store_rows import StoredRun, StoredSequence

_LEGACY_FOOTER = "<dt>versions</dt>\n<dd>adaptlab "
"""What reports written before the generator mark show in their footer."""


def is_report(path: Path) -> bool:
    """Whether `path` holds an adaptlab HTML report (which a new report may replace)."""
    try:
        with path.open("rb") as file:
            head = file.read(4096)
            file.seek(0, 2)
            file.seek(max(0, file.tell() - 65536))
            tail = file.read()
    except OSError:
        return False
    if not head.startswith(b"<!DOCTYPE html>"):
        return False
    return GENERATOR.encode() in head or _LEGACY_FOOTER.encode() in tail


def render_report(
    records: Sequence[StoredRun],
    *,
    title: str,
    validations: Sequence[Mapping[str, Any]] = (),
    metric: str | None = None,
    sequences: Sequence[StoredSequence] = (),
) -> str:
    """The report of `records` (the store's done runs) and `sequences` (its done sequences)
    as one self-contained HTML string; `validations` are the store's saved transferability
    validations, if any; `metric`, if given, judges every data set instead of the studies'
    own choice."""
    if sequences and not records:
        return render_sequences(sequences, title)
    view = study_view(read_runs(records), read_validations(validations), metric)
    return render(view, title, sequences)


def write_report(
    records: Sequence[StoredRun],
    out: Path,
    *,
    title: str,
    validations: Sequence[Mapping[str, Any]] = (),
    metric: str | None = None,
    sequences: Sequence[StoredSequence] = (),
) -> Path:
    """Write the report of `records` and `sequences` to `out` atomically (temp file +
    rename); return `out`.

    Raises ConfigError (an AdaptlabError) when both are empty or a run cannot be shown.
    """
    out = Path(out)
    text = render_report(
        records, title=title, validations=validations, metric=metric, sequences=sequences
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, text.encode("utf-8"))
    return out

"""A sequence's finished stages in the results store, kept as each finishes so a stopped
sequence resumes after its last finished stage."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from adaptlab.continual.result import StageOutcome
from adaptlab.study.store_file import StoreFile, json_text, utc_now


class StageRows(StoreFile):
    """The results store's writes and reads of sequences' stages."""

    def save_stage(self, run_id: str, stage: int, outcome: StageOutcome) -> None:
        """Keep a sequence's finished stage (replacing one of a run that started again)."""
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO stages VALUES (?, ?, ?, ?)",
                (run_id, stage, json_text(outcome.to_dict()), utc_now()),
            )

    def keep_stages(self, run_id: str, outcomes: Sequence[StageOutcome]) -> None:
        """Make the store's stages of `run_id` the finished `outcomes` a sequence resumes
        from: stages it has keep their rows (and times), missing ones are added, later ones
        (of an attempt whose state was not kept) are removed."""
        with self._transaction() as db:
            db.execute(
                "DELETE FROM stages WHERE run_id = ? AND stage >= ?", (run_id, len(outcomes))
            )
            db.executemany(
                "INSERT OR IGNORE INTO stages VALUES (?, ?, ?, ?)",
                [
                    (run_id, stage, json_text(outcome.to_dict()), utc_now())
                    for stage, outcome in enumerate(outcomes)
                ],
            )

    def stages(self, run_id: str) -> list[tuple[StageOutcome, datetime]]:
        """A sequence's finished stages in order, each with the time it finished."""
        rows = self._db.execute(
            "SELECT stage, record, finished_at FROM stages WHERE run_id = ? ORDER BY stage",
            (run_id,),
        ).fetchall()
        where = f"{self.path}: run {run_id}"
        return [
            (
                StageOutcome.from_dict(json.loads(record), f"{where}: stage {stage}"),
                datetime.fromisoformat(finished),
            )
            for stage, record, finished in rows
        ]

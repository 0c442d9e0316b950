"""What `adaptlab rank --validate` found for a store's runs, kept in the store for the report:
one row per data set and kind."""

from __future__ import annotations

import json
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.study.store_file import StoreFile, json_text, utc_now

VALIDATION_KINDS = ("models", "layers")


class ValidationRows(StoreFile):
    """The results store's writes and reads of validations."""

    def save_validation(self, data: str, kind: str, result: dict[str, Any]) -> None:
        """Keep what `rank --validate` found on `data` (replacing an earlier one of that kind)."""
        if kind not in VALIDATION_KINDS:
            raise ConfigError(f"a validation's kind is {' or '.join(VALIDATION_KINDS)}, not {kind}")
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO validations VALUES (?, ?, ?, ?)",
                (data, kind, json_text(result), utc_now()),
            )

    def validations(self) -> list[dict[str, Any]]:
        """Every saved validation (per data set: models, then layers): its result plus data,
        kind and created_at."""
        rows = self._db.execute(
            "SELECT data, kind, result, created_at FROM validations ORDER BY data, kind DESC"
        ).fetchall()
        return [
            {**json.loads(result), "data": data, "kind": kind, "created_at": created}
            for data, kind, result, created in rows
        ]

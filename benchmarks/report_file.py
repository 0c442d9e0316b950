"""What every benchmark's JSON ends with: the versions of the libraries it measured, and the
report written where `--out` says, its printed table kept in it."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any


def versions(*names: str) -> dict[str, str]:
    """The installed version of each distribution of `names`."""
    return {name: importlib.metadata.version(name) for name in names}


def write_report(report: dict[str, Any], table: str, out: Path) -> None:
    """Print `table`, keep it in `report` and write the report to `out` as JSON."""
    report["table"] = table
    print(table)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out}")

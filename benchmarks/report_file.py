"""What every benchmark's JSON holds besides its figures: where it comes from (`heading`), the
versions of the libraries it measured and the machine it ran on, its goals (`goal`), and the
report written where `--out` says (`write_json`), its printed table kept in it
(`write_report`)."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any


def heading(benchmark: str) -> dict[str, Any]:
    """A report's first fields: the benchmark's name, when it ran and the command that ran it."""
    return {
        "benchmark": benchmark,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": [Path(sys.executable).name, *sys.argv],
    }


def versions(*names: str) -> dict[str, str]:
    """The installed version of each distribution of `names`."""
    return {name: importlib.metadata.version(name) for name in names}


def machine(load_before: tuple[float, float, float]) -> dict[str, Any]:
    """The platform, Python, the CPUs, and the load average before (`load_before`) and now."""
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
    }


def goal(name: str, value: float, op: str, limit: float) -> dict[str, Any]:
    """A goal's record: `value` against `limit` (`op` is ">=" or "<="), and whether it passed."""
    passed = value >= limit if op == ">=" else value <= limit
    return {"goal": name, "value": value, "op": op, "limit": limit, "pass": passed}


def write_json(report: dict[str, Any], out: Path, indent: int = 2) -> None:
    """Write `report` to `out` as JSON (values JSON has no type for, such as paths, as text)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=indent, default=str) + "\n")
    print(f"wrote {out}")


def write_report(report: dict[str, Any], table: str, out: Path) -> None:
    """Print `table`, keep it in `report` and write the report to `out` as JSON."""
    report["table"] = table
    print(table)
    write_json(report, out, indent=1)

"""Every benchmark script imports: what it takes from adaptlab (and from the other scripts)
still exists. The scripts themselves run outside the test suite (`--quick` checks each one)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(path.stem for path in BENCHMARKS.glob("*.py"))


@pytest.mark.parametrize("name", SCRIPTS)
def test_benchmark_script_imports(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    module = importlib.import_module(name)
    assert module.__file__ is not None and Path(module.__file__).parent == BENCHMARKS
    sys.modules.pop(name, None)


def test_large_model_memory_counts_fake_steps_as_real_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every setup's step on fake tensors counts the bytes its real step counts, and offloading
    moves bytes to the host side of the count."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    script = importlib.import_module("large_model_memory")
    out = tmp_path / "memory.json"
    argv = ["--shapes", "tiny", "--tokens", "32", "--fit-shape", "", "--check-shape", "tiny"]
    assert script.main([*argv, "--check-tokens", "32", "--no-time", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    checks = {check["setup"]: check for check in report["checks"]}
    assert sorted(checks) == list("abcdef")
    assert all(check["equal"] and check["real_bytes"] > 0 for check in checks.values())
    rows = {row["setup"]: row for row in report["rows"]}
    assert sorted(rows) == list("abcdef")
    assert all(row["fake"] and row["peak_bytes"] > row["start_bytes"] for row in rows.values())
    assert rows["f"]["host_peak_bytes"] > 0 == rows["e"]["host_peak_bytes"]
    assert len(report["goals"]) == 4
    sys.modules.pop("large_model_memory", None)

"""Every benchmark script imports: what it takes from adaptlab (and from the other scripts)
still exists. The scripts themselves run outside the test suite (`--quick` checks each one)."""

from __future__ import annotations

import importlib
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

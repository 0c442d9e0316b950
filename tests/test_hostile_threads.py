"""Thread counts a user gives that no machine computes with: `--threads` and `ADAPTLAB_THREADS`
past `MAX_THREADS` (torch would start that many threads; past a C int OpenMP ignores the count
with a warning) are one `error:` line, exit 1; an `OMP_NUM_THREADS` of nested levels (`1,2`),
which OpenMP accepts, is read for its first level instead of failing every command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_cases import refused, unchanged
from test_threads import OURS, child

from adaptlab.threads import COUNT_VARIABLE, MAX_THREADS, THREADS_VARIABLE

HUGE = ["10000", "2147483648", "99999999999999999999"]


def adaptlab(args: list[str], **variables: str) -> subprocess.CompletedProcess[str]:
    """`adaptlab ARGS` in a fresh process (threads are chosen before torch loads)."""
    environ = {k: v for k, v in os.environ.items() if k not in OURS} | variables
    return subprocess.run(
        [sys.executable, "-m", "adaptlab", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("count", HUGE)
def test_a_thread_count_past_the_most_is_one_line(
    count: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with unchanged(tmp_path):
        refused(
            ["--threads", count, "data", "list"], capsys,
            f"--threads must be a whole number of threads from 1 to {MAX_THREADS}", repr(count),
        )  # fmt: skip


@pytest.mark.parametrize("count", HUGE[::2])
def test_a_variable_past_the_most_is_one_line_before_torch_loads(count: str) -> None:
    done = adaptlab(["data", "list"], **{THREADS_VARIABLE: count})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1, done.stderr
    assert lines == [
        f"error: {THREADS_VARIABLE} must be a whole number of threads from 1 to {MAX_THREADS}, "
        f"got {count!r}"
    ]
    assert "libgomp" not in done.stderr


def test_nested_openmp_levels_count_their_first_level() -> None:
    found = child(["methods"], OMP_NUM_THREADS="1,2")
    assert found["env"][COUNT_VARIABLE] == "1" and found["torch"] == 1  # type: ignore[index]
    done = adaptlab(["data", "list"], OMP_NUM_THREADS="0,2")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"error: {COUNT_VARIABLE} must be a whole number of threads from 1 to {MAX_THREADS}, "
        "got '0,2'"
    ]

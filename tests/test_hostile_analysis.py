"""`adaptlab analyze` given an `--adapter` that is a file (a data file, say): the error names
it as no adapter folder, before any output folder is looked at. One `error:` line, exit 1,
every input unchanged and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_cases import refused, unchanged, write_reviews


@pytest.mark.parametrize("command", ["spectrum", "rsa", "cka", "landscape", "fusion"])
def test_an_adapter_that_is_a_file_is_named_as_no_adapter_folder(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_reviews(tmp_path / "reviews.csv")
    args = ["analyze", command, "--adapter", str(data)]
    if command != "spectrum":
        args += ["--data", str(data)]
    with unchanged(tmp_path):
        line = refused(args, capsys, f"{data}: no manifest.json; not an adaptlab adapter folder")
    assert "analysis folder" not in line

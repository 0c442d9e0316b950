"""`adaptlab neurons find --templates FILE` with a templates file that is wrong: the error names
that file (not the fact file beside it), and `--templates` says it takes a file, not JSON
text. Each refusal is one `error:` line, exit 1, every input unchanged and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_cases import refused, run_cli, unchanged


@pytest.mark.parametrize(
    ("templates", "needle"),
    [
        ([1], "templates must map each relation to a list of templates"),
        ({"capital": "The capital of [X] is [Y]."}, "relation 'capital' needs a list of templates"),
        (
            {"capital": ["no slots here"]},
            "template 'no slots here' needs exactly one [X] and one [Y]",
        ),
        (
            {"language": ["[X] speaks [Y]."]},
            "no templates for relation(s) capital (of the facts of",
        ),
    ],
)
def test_a_wrong_templates_file_is_named_in_the_error(
    templates: object, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = tmp_path / "facts.csv"
    facts.write_text("subject,relation,object\nFrance,capital,Paris\n")
    given = tmp_path / "templates.json"
    given.write_text(json.dumps(templates))
    args = ["neurons", "find", "--model", "bert-base-uncased", "--facts", str(facts)]
    args += ["--templates", str(given), "--relation", "capital", "--out", str(tmp_path / "kn")]
    with unchanged(tmp_path):
        refused(args, capsys, f"error: {given}: {needle}")


def test_templates_is_documented_as_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["neurons", "find", "--help"], capsys)
    assert code == 0
    assert "A JSON file of" in " ".join(part.strip("│ ") for part in out.splitlines())

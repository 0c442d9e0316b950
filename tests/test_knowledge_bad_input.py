"""`adaptlab neurons` on bad input: every case one line on stderr, exit 1, nothing else changed.

Options are checked before a model loads (a model name that does not exist proves it), output
folders before any work, and neurons.json field by field against the model.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_cases import run_cli
from test_knowledge_cli import FACTS
from test_knowledge_lm import tiny_lm

NO_MODEL = "no-such-model-folder/x/y"
"""A model that cannot load: an error about it means the options passed their checks."""


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bert")
    lm = tiny_lm("bert")
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("facts") / "facts.json"
    path.write_text(json.dumps(FACTS))
    return path


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory, model: Path, facts: Path) -> dict[str, Any]:
    """A valid neurons.json of the tiny model (as `find` wrote it)."""
    out = tmp_path_factory.mktemp("found")
    code = _main(
        ["neurons", "find", "--model", str(model), "--facts", str(facts), "--relation",
         "capital", "--min-correct", "0", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    data: dict[str, Any] = json.loads((out / "neurons.json").read_text())
    assert all(row["neurons"] for row in data["results"])
    return data


def _main(args: list[str]) -> int:
    from adaptlab.cli.app import main

    try:
        main(args)
    except SystemExit as done:
        return int(done.code or 0)
    return 0


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def refused(
    args: list[str], capsys: pytest.CaptureFixture[str], folder: Path, *expected: str
) -> str:
    """Run; assert exit 1, one line naming `expected`, no traceback, `folder` unchanged."""
    before = _snapshot(folder)
    code, _, err = run_cli(args, capsys)
    assert code == 1, err
    assert "Traceback" not in err and err.endswith("\n"), err
    *progress, line = err[:-1].split("\n")  # progress bars end in a newline of their own
    assert line.startswith("error: ") and not any("error" in p for p in progress), err
    for text in expected:
        assert text in line, err
    assert _snapshot(folder) == before
    return line


def _find(model: str, facts: Path, out: Path, *extra: str) -> list[str]:
    return ["neurons", "find", "--model", model, "--facts", str(facts), "--relation", "capital",
            "--out", str(out), *extra]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--limit", "-1"], "--limit must be a positive integer, got -1"),
        (["--limit", "0"], "--limit must be a positive integer, got 0"),
        (["--min-correct", "2"], "--min-correct must be a number from 0 to 1, got 2.0"),
        (["--min-correct", "-0.5"], "--min-correct must be a number from 0 to 1"),
        (["--min-correct", "nan"], "--min-correct must be a number from 0 to 1, got nan"),
        (["--quadrature", "riemann", "--steps", "0"], "steps must be a whole number from 1"),
        (["--quadrature", "riemann", "--steps", "-3"], "got -3"),
        (["--steps", "20"], "steps apply to the riemann quadrature"),
        (["--quadrature", "simpson"], "unknown quadrature 'simpson'"),
        (["--tolerance", "0"], "tolerance must be above 0 and below 1"),
        (["--tolerance", "nan"], "got nan"),
        (["--tolerance", "inf"], "got inf"),
        (["--quadrature", "riemann", "--tolerance", "0.1"], "a tolerance applies to"),
        (["--kind", "encoder"], "unknown language-model kind 'encoder'"),
        (["--device", "gpu9"], "unknown device 'gpu9'"),
    ],
)
def test_find_options_are_checked_before_the_model_loads(
    extra: list[str], expected: str, tmp_path: Path, facts: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    out = tmp_path / "out"
    refused(_find(NO_MODEL, facts, out, *extra), capsys, tmp_path, expected)
    assert not out.exists()


def test_find_output_is_checked_before_any_work(
    tmp_path: Path, facts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "taken.txt"
    file.write_text("keep me")
    refused(_find(NO_MODEL, facts, file), capsys, tmp_path, "is a file; give a folder")
    refused(_find(NO_MODEL, facts, file / "sub"), capsys, tmp_path, "is a file, not a folder")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "neurons.json").write_text('{"mine": "not adaptlab\'s"}')
    refused(_find(NO_MODEL, facts, foreign), capsys, tmp_path,
            "holds a file adaptlab did not write named 'neurons.json'")  # fmt: skip
    (foreign / "neurons.json").unlink()
    (foreign / "layers.png").write_text("my drawing")
    refused(_find(NO_MODEL, facts, foreign), capsys, tmp_path, "named 'layers.png'")
    odd = tmp_path / "odd"
    (odd / "layers.png").mkdir(parents=True)
    refused(_find(NO_MODEL, facts, odd), capsys, tmp_path, "holds a folder named 'layers.png'")
    clash = tmp_path / "clash"  # the facts file where find would write
    clash.mkdir()
    (clash / "neurons.json").write_text(json.dumps(FACTS))
    refused(_find(NO_MODEL, clash / "neurons.json", clash), capsys, tmp_path,
            "holds a file adaptlab did not write named 'neurons.json'")  # fmt: skip


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_find_refuses_a_read_only_folder(
    tmp_path: Path, facts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        refused(_find(NO_MODEL, facts, locked / "out"), capsys, tmp_path, "cannot write --out")
    finally:
        locked.chmod(0o700)


def test_find_with_no_known_fact_fails_and_suggests_templates(
    tmp_path: Path, model: Path, facts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    err = refused(
        _find(str(model), facts, out, "--min-correct", "1"), capsys, tmp_path,
        "answers none of the 3 checked 'capital' facts correctly", "--templates",
    )  # fmt: skip
    assert "under at least 1 of their 3 templates" in err
    assert not out.exists()


def test_find_input_files(tmp_path: Path, facts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    folder = tmp_path / "facts.json"
    folder.mkdir()
    refused(_find(NO_MODEL, folder, out), capsys, tmp_path, "is a folder, not a file")
    missing = tmp_path / "missing.json"
    refused(_find(NO_MODEL, missing, out), capsys, tmp_path, "'" + str(missing) + "' does not")
    latin = tmp_path / "latin.json"
    latin.write_bytes(json.dumps(FACTS).replace("Peru", "Per\u00fa").encode("latin-1"))
    refused(_find(NO_MODEL, latin, out), capsys, tmp_path, "not UTF-8")
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({**FACTS, "facts": [["Peru", "language", "Spanish"]]}))
    refused(_find(NO_MODEL, empty, out), capsys, tmp_path, "no facts of relation")
    bare = tmp_path / "bare-model"  # a folder with no model in it: checked before loading
    bare.mkdir()
    refused(_find(str(bare), facts, out), capsys, tmp_path, "the folder is empty")
    assert not out.exists()


def test_user_text_is_printed_as_given(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("COLUMNS", "250")  # table cells unwrapped
    marked = {
        "templates": {"[bold red]cap $x^$": ["The capital of [X] is [Y]."]},
        "facts": [
            ["[/x] land", "[bold red]cap $x^$", "Paris"],
            [":smile: land", "[bold red]cap $x^$", "Lima"],
        ],
    }  # fmt: skip
    path = tmp_path / "[red]facts.json"
    path.write_text(json.dumps(marked))
    out = tmp_path / "[b]out"
    args = ["neurons", "find", "--model", str(model), "--facts", str(path), "--relation",
            "[bold red]cap $x^$", "--min-correct", "0", "--out", str(out)]  # fmt: skip
    code, printed, err = run_cli(args, capsys)
    assert code == 0, err
    assert "<[/x] land, [bold red]cap $x^$, Paris>" in printed and ":smile: land" in printed
    assert str(out / "neurons.json") in printed
    erase = ["neurons", "erase", "--neurons", str(out / "neurons.json"), "--model", str(model)]
    code, printed, err = run_cli(erase, capsys)
    assert code == 0, err
    assert "[bold red]cap $x^$" in printed
    err = refused(
        _find(NO_MODEL, path, tmp_path / "o", "--relation", "[/x]"), capsys, tmp_path,
        "no relation '[/x]'", "[red]facts.json",
    )  # fmt: skip


def _write(folder: Path, data: Any, name: str = "neurons.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _edit(found: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    data = json.loads(json.dumps(found))
    change(data)
    return data


COMMANDS = ["suppress", "amplify", "edit", "erase"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d["results"][0].update(neurons=[[-1, -5]], scores=[0.1]),
         "'results[0].neurons[0]' must be a pair [layer, index] of whole numbers >= 0, "
         "got [-1, -5]"),
        (lambda d: d["results"][1].update(neurons=[[99, 1066]], scores=[0.1]),
         "'results[1].neurons[0]' is [99, 1066], but the model has layers 0..1 and "
         "neurons 0..63"),
        (lambda d: d["results"][0].update(baseline_neurons=[[1, 64]]),
         "'results[0].baseline_neurons[0]' is [1, 64]"),
        (lambda d: d["results"][0].update(neurons=[[0, 1.5]], scores=[0.1]), "got [0, 1.5]"),
        (lambda d: d["results"][0].update(neurons=[[0, 1], [0, 1]], scores=[0.1, 0.2]),
         "'results[0].neurons[1]' repeats a neuron"),
        (lambda d: d["results"][0].update(scores=[]), "must hold one score per neuron"),
        (lambda d: d["results"][0].update(share=float("nan")),
         "'results[0].share' must be a number"),
        (lambda d: d["results"][0].update(probability="high"), "'results[0].probability'"),
        (lambda d: d["results"][0]["fact"].update(relation="language"),
         "must be the file's relation 'capital'"),
        (lambda d: d["results"][0].pop("fact"), "no field 'results[0].fact'"),
        (lambda d: d.update(results="all"), "'results' must be a list, got 'all'"),
        (lambda d: d.update(results=[]), "no facts with knowledge neurons"),
        (lambda d: [r.update(neurons=[], scores=[]) for r in d["results"]],
         "3 facts with knowledge neurons"),
        (lambda d: d.pop("model"), "no field 'model'"),
        (lambda d: d.update(model=""), "'model' must be a non-empty string"),
        (lambda d: d.update(kind="encoder"), "'kind' must be one of masked, causal"),
        (lambda d: d.update(num_layers=30), "written for a model with 30 layers"),
        (lambda d: d.update(histogram=[1, 2, 3]), "'histogram' has 3 layers"),
        (lambda d: d.update(steps=10**30), "'steps' must be a whole number"),
        (lambda d: d.update(tolerance=-1), "'tolerance' must be a number from 0 to 1"),
        (lambda d: d.update(relation=["capital"]), "'relation' must be a non-empty string"),
        (lambda d: d.update(facts="no/such/facts.json"), "does not exist"),
    ],
)  # fmt: skip
def test_neuron_files_are_checked_field_by_field(
    change: Callable[[dict[str, Any]], None], expected: str, found: dict[str, Any],
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    path = _write(tmp_path / "kn", _edit(found, change))
    for command in COMMANDS:
        args = ["neurons", command, "--neurons", str(path), "--model", str(model)]
        refused(args, capsys, tmp_path, expected)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "not a neuron file written by `adaptlab neurons find`"),
        ("[1, 2]", "the file must be a JSON object, got [1, 2]"),
        ("", "not a neuron file"),
        ("1" * 5000, "not a neuron file"),
        ("[" * 100000, "not a neuron file"),
    ],
)
def test_unreadable_neuron_files(
    content: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "kn", content)
    refused(["neurons", "suppress", "--neurons", str(path)], capsys, tmp_path, expected)


def test_neuron_file_paths(
    tmp_path: Path, found: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "dir.json").mkdir()
    refused(["neurons", "erase", "--neurons", str(tmp_path / "dir.json")], capsys, tmp_path,
            "is not a file")  # fmt: skip
    latin = tmp_path / "latin" / "neurons.json"
    latin.parent.mkdir()
    latin.write_bytes(json.dumps(found).encode("utf-8") + "\u00e9".encode("latin-1"))
    refused(["neurons", "erase", "--neurons", str(latin)], capsys, tmp_path, "UnicodeDecodeError")
    for command, output in [("suppress", "suppress.png"), ("edit", "edit.json")]:
        path = _write(tmp_path / command, found)
        (path.parent / output).mkdir()
        refused(["neurons", command, "--neurons", str(path)], capsys, tmp_path,
                f"holds a folder named {output!r}")  # fmt: skip


def test_foreign_files_beside_the_neuron_file_are_kept(
    tmp_path: Path, found: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "kn", found)
    (path.parent / "erase.json").write_text('{"my": "notes"}')
    (path.parent / "amplify.png").write_text("not a picture")
    refused(["neurons", "erase", "--neurons", str(path)], capsys, tmp_path,
            "holds a file adaptlab did not write named 'erase.json'")  # fmt: skip
    refused(["neurons", "amplify", "--neurons", str(path)], capsys, tmp_path,
            "named 'amplify.png'")  # fmt: skip


@pytest.mark.parametrize("command", ["suppress", "amplify", "edit", "erase"])
@pytest.mark.parametrize("seed", ["-1", "4294967296", "99999999999999999999"])
def test_seeds_out_of_range_are_refused(
    tmp_path: Path,
    found: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    command: str,
    seed: str,
) -> None:
    path = _write(tmp_path / "kn", found)
    refused(["neurons", command, "--neurons", str(path), "--seed", seed], capsys, tmp_path,
            f"--seed must be an integer from 0 to 4294967295, got {seed}")  # fmt: skip


def test_edit_options(
    tmp_path: Path, found: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "kn", found)
    edit = ["neurons", "edit", "--neurons", str(path)]
    refused([*edit, "--limit", "0"], capsys, tmp_path, "--limit must be a positive integer")
    refused([*edit, "--lambda1", "nan"], capsys, tmp_path, "--lambda1 must be a finite number")
    refused([*edit, "--lambda2", "inf"], capsys, tmp_path, "--lambda2 must be a finite number")
    first_bare = _edit(found, lambda d: d["results"][0].update(neurons=[], scores=[]))
    path = _write(tmp_path / "bare", first_bare)
    refused(["neurons", "edit", "--neurons", str(path), "--limit", "1"], capsys, tmp_path,
            "none of the first 1 facts has knowledge neurons")  # fmt: skip
    same = _edit(found, lambda d: [r["fact"].update(object="Paris") for r in d["results"]])
    refused(["neurons", "edit", "--neurons", str(_write(tmp_path / "same", same))], capsys,
            tmp_path, "every fact here has the same one")  # fmt: skip


def test_good_files_and_odd_but_valid_options_work(
    tmp_path: Path, model: Path, found: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    moved = _edit(found, lambda d: d.update(model=str(tmp_path / "gone")))
    path = _write(tmp_path / "kn", moved)
    code, _, err = run_cli(["neurons", "suppress", "--neurons", str(path)], capsys)
    assert code == 1 and "pass --model" in err  # a folder the file names is not followed ...
    args = ["neurons", "suppress", "--neurons", str(path), "--model", str(model),
            "--seed", "4294967295"]  # fmt: skip
    code, printed, err = run_cli(args, capsys)  # ... --model says where the model is now
    assert code == 0, err
    assert "suppress over 3 facts" in printed and "nan" not in printed
    saved = json.loads((tmp_path / "kn" / "suppress.json").read_text())
    assert saved["seed"] == 4294967295 and saved["model"] == str(model)

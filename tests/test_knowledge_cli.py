"""`adaptlab neurons` end to end on a tiny random BERT masked LM saved as a model folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_cases import run_cli
from test_knowledge_lm import tiny_lm

FACTS = {
    "templates": {
        "capital": ["The capital of [X] is [Y].", "[X]'s capital is [Y].", "[Y] is in [X]."],
        "language": ["People in [X] speak [Y].", "The language of [X] is [Y]."],
    },
    "facts": [
        ["France", "capital", "Paris"],
        ["Peru", "capital", "Lima"],
        ["Japan", "capital", "Tokyo"],
        ["France", "language", "French"],
        ["Peru", "language", "Spanish"],
    ],
}


def test_find_then_scale_edit_erase(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lm = tiny_lm("bert")
    model = tmp_path / "bert"
    lm.model.save_pretrained(model)
    lm.tokenizer.save_pretrained(model)
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(FACTS))
    out = tmp_path / "kn"
    code, printed, err = run_cli(
        ["neurons", "find", "--model", str(model), "--facts", str(facts), "--relation",
         "capital", "--quadrature", "riemann", "--steps", "3", "--min-correct", "0",
         "--out", str(out)],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "3 of 3 checked capital facts" in printed and "<Peru, capital, Lima>" in printed
    # not a terminal: plain progress lines, no carriage-return updates of a live bar
    assert "attributing: 3/3 facts (100%)" in err
    assert not any(f"\r{step}" in err for step in ("checking facts", "attributing"))
    saved = json.loads((out / "neurons.json").read_text())
    assert saved["kind"] == "masked" and len(saved["results"]) == 3
    assert (saved["quadrature"], saved["steps"], saved["tolerance"]) == ("riemann", 3, None)
    assert sum(saved["histogram"]) == sum(len(r["neurons"]) for r in saved["results"]) > 0
    assert (out / "layers.png").stat().st_size > 0
    neurons = ["--neurons", str(out / "neurons.json"), "--model", str(model)]
    for command, written in [
        ("suppress", "suppress.json"),
        ("amplify", "amplify.json"),
        ("erase", "erase.json"),
        ("edit", "edit.json"),
    ]:
        code, printed, err = run_cli(["neurons", command, *neurons], capsys)
        assert code == 0, err
        assert (out / written).is_file()
    suppress = json.loads((out / "suppress.json").read_text())
    assert suppress["factor"] == 0 and suppress["summary"]["facts"] == len(suppress["rows"])
    erase = json.loads((out / "erase.json").read_text())
    assert [r["neurons"] for r in erase["rows"]] == ["knowledge", "random"]
    edit = json.loads((out / "edit.json").read_text())
    assert set(edit["summary"]) == {"knowledge", "random"}


def test_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["neurons", "suppress", "--neurons", str(tmp_path / "x.json")], capsys)
    assert code == 1 and "does not exist" in err and "Traceback" not in err
    code, _, err = run_cli(
        ["neurons", "find", "--model", "m", "--facts", "builtin:planets", "--relation", "r"],
        capsys,
    )
    assert code == 1 and "no built-in fact set" in err
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    code, _, err = run_cli(["neurons", "amplify", "--neurons", str(broken)], capsys)
    assert code == 1 and "not a neuron file" in err and "Traceback" not in err
    no_model = tmp_path / "no-model.json"
    meta = {"kind": "causal", "facts": "f", "relation": "r", "results": []}
    no_model.write_text(json.dumps(meta))
    code, _, err = run_cli(["neurons", "erase", "--neurons", str(no_model)], capsys)
    assert code == 1 and "no field 'model'" in err and "Traceback" not in err

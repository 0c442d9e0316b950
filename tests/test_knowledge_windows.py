"""`adaptlab neurons` on inputs past what a statistic or a model can take: prompts longer than
the model's window, a facts file of one relation, edits that overflow, a causal kind asked of
an encoder. Each case is one line and exit 1, or a result with no NaN in it; inputs unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers as T
from cli_cases import refused, run_cli, unchanged
from test_knowledge_cli import FACTS
from test_knowledge_lm import minilm_tokenizer
from tiny_models import tiny_config

from adaptlab.cli.app import main

WINDOW = 16
LONG = "France " * 20  # a subject of more than WINDOW tokens
TEMPLATES = {"capital": ["The capital of [X] is [Y].", "[X]'s capital is [Y]."]}
"""Templates a causal LM can complete ([Y] ends them)."""


def save_lm(folder: Path, arch: str) -> Path:
    """A tiny random masked (bert) or causal (llama) LM reading at most WINDOW positions."""
    tokenizer = minilm_tokenizer()
    torch.manual_seed(0)
    config = tiny_config(arch)
    config.vocab_size, config.max_position_embeddings = tokenizer.vocab_size, WINDOW
    model = T.BertForMaskedLM(config) if arch == "bert" else T.LlamaForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of inputs: two tiny LMs, the two-relation facts and a one-fact file."""
    folder = tmp_path_factory.mktemp("inputs")
    save_lm(folder / "bert", "bert")
    save_lm(folder / "llama", "llama")
    (folder / "facts.json").write_text(json.dumps(FACTS))
    one = {"templates": TEMPLATES, "facts": [FACTS["facts"][0]]}
    (folder / "one.json").write_text(json.dumps(one))
    long = {"templates": TEMPLATES, "facts": [*FACTS["facts"][:3], [LONG, "capital", "Paris"]]}
    (folder / "long.json").write_text(json.dumps(long))
    return folder


def find(model: Path, facts: Path, out: Path, *extra: str) -> list[str]:
    return ["neurons", "find", "--model", str(model), "--facts", str(facts), "--relation",
            "capital", "--min-correct", "0", "--quadrature", "riemann", "--steps", "2",
            "--out", str(out), *extra]  # fmt: skip


def refused_after_progress(
    args: list[str], capsys: pytest.CaptureFixture[str], *needles: str
) -> None:
    """`adaptlab ARGS` fails with exit 1 and one `error:` line, the last, holding every needle;
    the lines before it are progress lines (a command that scored facts shows them)."""
    code, _, err = run_cli(args, capsys)
    lines = err.strip().splitlines()
    assert code == 1 and "Traceback" not in err, err
    assert lines[-1].startswith("error: ") and all("%" in line for line in lines[:-1]), err
    for needle in needles:
        assert needle in lines[-1], (needle, lines[-1])


def strict(path: Path) -> Any:
    """The JSON file read as standard JSON: NaN and Infinity are refused."""

    def refuse(name: str) -> None:
        raise AssertionError(f"{path.name} holds {name}")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_a_prompt_longer_than_the_window_is_refused_before_any_fact_is_scored(
    arch: str, inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "kn"
    with unchanged(inputs):
        line = refused(
            find(inputs / arch, inputs / "long.json", out),
            capsys,
            "long.json: the prompt of fact '<France France",
            "template 'The capital of [X] is [Y].'",
            f"more than the {WINDOW} that model {inputs / arch} reads at once (its window)",
        )
    assert "tokens" in line and not out.exists()


def test_erasing_with_no_other_relation_writes_no_nan(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "kn"
    with unchanged(inputs):
        code, _, err = run_cli(find(inputs / "bert", inputs / "one.json", out), capsys)
        assert code == 0, err
        erase = ["neurons", "erase", "--neurons", str(out / "neurons.json")]
        code, printed, err = run_cli([*erase, "--model", str(inputs / "bert")], capsys)
    assert code == 0, err
    rows = strict(out / "erase.json")["rows"]
    assert [(r["others_before"], r["others_after"]) for r in rows] == [(None, None)] * 2
    assert all(r["relation_before"] > 0 for r in rows)
    assert "n/a: not measured, the facts file holds no facts of other relations" in printed


@pytest.fixture(scope="module")
def found(inputs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """neurons.json of the tiny BERT on the two-relation facts."""
    out = tmp_path_factory.mktemp("found")
    args = find(inputs / "bert", inputs / "facts.json", out)
    with pytest.raises(SystemExit) as done:
        main(args)
        raise SystemExit(0)
    assert done.value.code in (0, None)
    return out / "neurons.json"


def test_an_edit_that_overflows_the_model_writes_nothing(
    found: Path, inputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with unchanged(found.parent), unchanged(inputs):
        refused_after_progress(
            ["neurons", "edit", "--neurons", str(found), "--lambda2", "1e30"]
            + ["--model", str(inputs / "bert")],
            capsys,
            "edit.json: ",
            "came out nan, not a measurement",
            "lower --lambda1 and --lambda2",
        )


def test_an_edit_limited_to_facts_of_one_object_is_refused(
    found: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with unchanged(found.parent):
        refused(
            ["neurons", "edit", "--neurons", str(found), "--limit", "1"],
            capsys,
            "the first 1 facts have the same one; raise --limit",
        )


def test_causal_attribution_of_an_encoder_is_refused(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "kn"
    with unchanged(inputs):
        refused(
            find(inputs / "bert", inputs / "facts.json", out, "--kind", "causal"),
            capsys,
            "is a BertForMaskedLM (bert), an encoder that reads text both ways",
            "--kind causal",
            "needs a decoder-only causal LM",
        )
    assert not out.exists()


def test_a_subject_holding_the_object_slot_is_plain_text(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = tmp_path / "slot.json"
    facts.write_text(
        json.dumps({"templates": TEMPLATES, "facts": [["[Y] land", "capital", "Paris"]]})
    )
    code, printed, err = run_cli(find(inputs / "llama", facts, tmp_path / "kn"), capsys)
    assert code == 0, err
    assert "<[Y] land, capital, Paris>" in printed
    strict(tmp_path / "kn" / "neurons.json")

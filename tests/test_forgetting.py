"""Forgetting on source probes (`adaptlab.forgetting`, `adaptlab analyze forgetting`): the
paired difference and its standard error, a probe's forgetting equal to two separate
evaluations (a base loaded on its own, the trained run) on the same items, token scores equal
to the model's own loss, the command's JSON, PNG and table, and each bad input one line with
nothing written."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from cli_cases import refused, run_cli
from generative_helpers import tiny_decoder

from adaptlab.data.generative_encoding import EncodedExample
from adaptlab.engine.restore import load_trained
from adaptlab.forgetting.facts_probe import FactsProbe
from adaptlab.forgetting.measure import measure_forgetting
from adaptlab.forgetting.options import ProbeOptions
from adaptlab.forgetting.paired import ItemScores, paired_forgetting
from adaptlab.forgetting.probe import ProbedModel
from adaptlab.forgetting.text_probe import text_probe
from adaptlab.forgetting.token_scores import token_scores
from adaptlab.knowledge.facts import Fact, FactSet
from adaptlab.models.loading import load_model
from adaptlab.records.config import TrainConfig
from adaptlab.runs.run import RunSpec, execute

WORDS = [
    *("the", "cat", "sat", "on", "a", "mat", "and", "the", "dog", "ran", "to", "the", "park"),
    *("while", "birds", "sang", "in", "trees"),
]


def text(count: int, seed: int) -> str:
    """`count` paragraphs of words the tiny tokenizer knows."""
    generator = torch.Generator().manual_seed(seed)
    paragraphs = []
    for _ in range(count):
        picks = torch.randint(len(WORDS), (30,), generator=generator).tolist()
        paragraphs.append(" ".join(WORDS[i] for i in picks))
    return "\n\n".join(paragraphs) + "\n"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | str]:
    """A tiny decoder, a causal-LM LoRA run of it trained hard on one text, a held-out text."""
    root = tmp_path_factory.mktemp("forgetting")
    decoder = tiny_decoder(root)
    (root / "train.txt").write_text(text(60, 0))
    (root / "held-out.txt").write_text(text(20, 1))
    run = root / "run"
    train = TrainConfig(epochs=2, batch_size=8, learning_rate=5e-2, max_length=32, seed=0)
    data = str(root / "train.txt")
    spec = RunSpec.build(decoder, data, "lora", train=train, data_options={"task": "causal-lm"})
    execute(spec, run, progress=False)
    return {"root": root, "decoder": decoder, "run": run}


def test_paired_forgetting_is_signed_as_a_loss_with_its_standard_error() -> None:
    accuracy = ItemScores("acc", True, {"a": 1.0, "b": 1.0, "c": 0.0, "d": 1.0})
    after = ItemScores("acc", True, {"a": 1.0, "b": 0.0, "c": 1.0, "d": 0.0})
    found = paired_forgetting("p", accuracy, after)
    differences = [0.0, 1.0, -1.0, 1.0]
    assert found.forgetting == pytest.approx(0.25)
    mean = sum(differences) / 4
    spread = math.sqrt(sum((d - mean) ** 2 for d in differences) / 3)
    assert found.standard_error == pytest.approx(spread / 2)
    assert (found.base, found.adapted) == (pytest.approx(0.75), pytest.approx(0.5))
    loss = ItemScores("nll", False, {"a": 2.0, "b": 3.0})
    higher = ItemScores("nll", False, {"a": 2.5, "b": 3.5})
    assert paired_forgetting("p", loss, higher).forgetting == pytest.approx(0.5)  # a rise: lost


def test_the_facts_compared_are_those_the_base_answers() -> None:
    facts = [Fact(s, "capital", o) for s, o in (("A", "x"), ("B", "y"), ("C", "z"))]
    probe = FactsProbe("facts:t", FactSet("t", facts, {"capital": ["[X] has [Y]"]}), limit=10)
    base = ItemScores("fact answered", True, {"capital: A -> x": 1.0, "capital: B -> y": 1.0,
                                              "capital: C -> z": 0.0})  # fmt: skip
    adapted = ItemScores("fact answered", True, {"capital: A -> x": 1.0, "capital: B -> y": 0.0})
    found = probe.compare(base, adapted)
    assert (found.items, found.forgetting, found.base) == (2, 0.5, 1.0)
    with pytest.raises(Exception, match="answers none of its 1 facts"):
        probe.compare(ItemScores("fact answered", True, {"capital: C -> z": 0.0}), adapted)


def test_token_scores_are_the_models_own_loss(setup: dict[str, Path | str]) -> None:
    loaded = load_model(str(setup["decoder"]), "causal_lm")
    ids = loaded.tokenizer("the cat sat on a mat and the dog ran", add_special_tokens=False)
    tokens = tuple(ids["input_ids"])
    prompt = (-100,) * 3 + tokens[3:]  # the first three tokens are context, not targets
    (whole, answer) = token_scores(
        loaded.model,
        loaded.tokenizer,
        [EncodedExample(tokens, tokens), EncodedExample(tokens, prompt)],
    )
    with torch.no_grad():
        batch = torch.tensor([tokens])
        own = loaded.model(input_ids=batch, labels=batch).loss.item()
        masked = loaded.model(input_ids=batch, labels=torch.tensor([prompt])).loss.item()
    assert whole.nll == pytest.approx(own, rel=1e-5)
    assert answer.nll == pytest.approx(masked, rel=1e-5)
    assert (whole.tokens, answer.tokens) == (len(tokens) - 1, len(tokens) - 3)


def test_forgetting_equals_two_separate_evaluations(setup: dict[str, Path | str]) -> None:
    loaded, _ = load_trained(setup["run"], model=str(setup["decoder"]))
    options = ProbeOptions(limit=6, window=16)
    probe = text_probe(str(Path(setup["root"]) / "held-out.txt"), loaded.tokenizer, options)
    (found,) = measure_forgetting(loaded.model, loaded.tokenizer, [probe])
    base = load_model(str(setup["decoder"]), "causal_lm").model  # loaded on its own
    alone = probe.score(ProbedModel(base, loaded.tokenizer))
    adapted = probe.score(ProbedModel(loaded.model, loaded.tokenizer))
    differences = [adapted.values[k] - alone.values[k] for k in alone.values]
    assert found.items == len(differences) == 6
    assert found.forgetting == pytest.approx(sum(differences) / 6, abs=1e-5)
    assert found.base == pytest.approx(alone.mean(list(alone.values)), abs=1e-5)
    assert abs(found.forgetting) > 1e-3  # the run moved the model: something to compare


def test_the_command_writes_json_png_and_a_table(
    setup: dict[str, Path | str], capsys: pytest.CaptureFixture[str]
) -> None:
    run, root = Path(setup["run"]), Path(setup["root"])
    args = [
        "analyze", "forgetting", "--adapter", str(run), "--model", str(setup["decoder"]),
        "--probe", f"text:{root / 'held-out.txt'}", "--probe", f"data:{root / 'train.txt'}",
        "--window", "16", "--limit", "8", "--no-progress",
    ]  # fmt: skip
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert "forgetting" in out and "held-out.txt" in out
    result = json.loads((run / "analysis" / "forgetting.json").read_text())
    held_out, trained_on = result["probes"]
    assert result["methods"] == ["lora"] and held_out["measure"] == "nll"
    assert held_out["items"] == 8 and held_out["base_perplexity"] > 1
    assert trained_on["forgetting"] < 0  # its own training text: learnt, not forgotten
    assert (run / "analysis" / "forgetting.png").read_bytes()[:4] == b"\x89PNG"


def test_bad_inputs_are_one_line_and_write_nothing(
    setup: dict[str, Path | str],
    trained: Path,
    tiny_model_dir: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = Path(setup["run"])
    out = tmp_path / "out"
    base = ["analyze", "forgetting", "--model", str(setup["decoder"]), "--out", str(out)]
    (tmp_path / "short.txt").write_text("the cat\n")
    for probe, needle in (
        ("text", "is not kind:value"),
        ("speech:x", "unknown probe kind 'speech'"),
        ("text:missing.txt", "neither a built-in probe text"),
        (f"text:{tmp_path / 'short.txt'}", "fewer than 128 tokens"),
    ):
        refused([*base, "--adapter", str(run), "--probe", probe], capsys, needle)
    window = [*base, "--adapter", str(run), "--probe", "text:fairy-tales", "--window", "9999"]
    refused(window, capsys, "window 9999 is longer than the model reads (512 tokens)")
    classifier = ["analyze", "forgetting", "--adapter", str(trained), "--model", tiny_model_dir]
    refused([*classifier, "--out", str(out)], capsys, "forgetting probes score a causal LM")
    assert not out.exists()
    assert not (trained / "analysis" / "forgetting.json").exists()


@pytest.mark.real
def test_facts_the_base_does_not_answer_are_refused(
    setup: dict[str, Path | str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("countryinfo")
    args = [
        "analyze", "forgetting", "--adapter", str(setup["run"]), "--model",
        str(setup["decoder"]), "--probe", "facts:countries", "--limit", "3",
        "--out", str(tmp_path / "out"), "--no-progress",
    ]  # fmt: skip
    refused(args, capsys, "the base model answers none of its")
    assert not (tmp_path / "out").exists()


def test_an_lm_eval_probe_compares_document_by_document(
    setup: dict[str, Path | str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("lm_eval")
    args = [
        "analyze", "forgetting", "--adapter", str(setup["run"]), "--model",
        str(setup["decoder"]), "--probe", "harness:adaptlab_country_choice", "--limit", "6",
        "--out", str(tmp_path), "--no-progress",
    ]  # fmt: skip
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    (found,) = json.loads((tmp_path / "forgetting.json").read_text())["probes"]
    assert found["measure"] == "acc" and found["items"] == 6
    assert 0 <= found["base"] <= 1 and 0 <= found["adapted"] <= 1
    assert -1 <= found["forgetting"] <= 1

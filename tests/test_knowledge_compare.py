"""`adaptlab neurons compare` (`adaptlab.knowledge.compare`): an adapted model against its base
(the same object with adaptation off) on the same facts. The base's attributions equal those of
a base loaded on its own, also with LoRA on every linear layer of the blocks, DoRA and (IA)3;
the adapted model's attributions still read the intermediate activation (completeness); an
adapter that changes nothing changes no answer and no neuron; the counts of a hand-made
comparison; the command's JSON, PNG and table on a trained LoRA run and a masked-LM run, and a
classifier run refused in one line with nothing written."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_cases import refused, run_cli, unchanged
from generative_helpers import tiny_decoder

import adaptlab
from adaptlab.errors import ConfigError
from adaptlab.knowledge.attribution import attribute
from adaptlab.knowledge.compare import (
    Answer,
    FactComparison,
    compare_facts,
    overlap,
    summarise,
)
from adaptlab.knowledge.compare_run import run_compare
from adaptlab.knowledge.fact_sources import load_facts
from adaptlab.knowledge.facts import Fact, FactSet
from adaptlab.knowledge.lm import KnowledgeLM, wrap_lm
from adaptlab.knowledge.neurons import FactNeurons, find_fact_neurons
from adaptlab.knowledge.prompts import token_queries
from adaptlab.knowledge.scoring import fact_scores
from adaptlab.methods.adapt import disabled
from adaptlab.models.loading import load_model
from adaptlab.records.config import TrainConfig
from adaptlab.runs.run import RunSpec, execute

TEMPLATES = ["The capital of [X] is [Y]", "[X]'s capital is [Y]"]
SUBJECTS = [
    *("France", "Peru", "Japan", "Chile", "Kenya", "Norway", "Egypt", "India", "Spain"),
    *("Brazil", "Canada", "Mexico", "Poland", "Greece", "Turkey", "Italy", "Sweden"),
    *("Ghana", "Nepal", "Cuba", "Iran", "Iraq", "Mali", "Laos", "Fiji", "Oman"),
]
ALL_LINEAR = ("query", "key", "value", "attention_out", "ffn_in", "ffn_out")
METHODS: dict[str, dict[str, Any]] = {
    "lora": {"lora": {"targets": ALL_LINEAR, "rank": 4}},
    "dora": {"lora": {"targets": ("ffn_out",), "dora": True}},
    "ia3": {"ia3": {}},
}
"""LoRA on every linear layer of the blocks (the FFN's down projection too), DoRA on the down
projection, and (IA)3, which scales the down projection's input."""


def decoder_lm(folder: str) -> KnowledgeLM:
    loaded = load_model(folder, "causal_lm")
    return wrap_lm(loaded.model, loaded.tokenizer, "causal", folder)


def adapted_lm(folder: str, method: dict[str, Any], scale: float = 0.0) -> KnowledgeLM:
    """The tiny decoder with `method`; its inserted parameters moved by `scale` (0: the model
    as adapting made it, unchanged for LoRA)."""
    loaded = load_model(folder, "causal_lm")
    adaptlab.adapt(loaded.model, method)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in loaded.model.named_parameters():
            if ".adaptlab." in name:
                parameter.add_(scale * torch.randn(parameter.shape, generator=generator))
    return wrap_lm(loaded.model, loaded.tokenizer, "causal", folder)


def known_facts_file(folder: str, path: Path) -> Path:
    """Capital facts whose object is the tiny decoder's greedy answer under the first template
    (so its base answers them), and two it does not answer; as a facts JSON file."""
    lm = decoder_lm(folder)
    tokenizer = lm.tokenizer
    facts: list[list[str]] = []
    for subject in SUBJECTS:
        query = token_queries(lm, TEMPLATES[0], subject, "x")[0]
        with torch.no_grad():
            logits = lm.model(input_ids=query.input_ids[None]).logits[0, query.position]
        guess = int(logits.argmax())
        word = tokenizer.convert_ids_to_tokens(guess)
        if word.isalpha() and tokenizer(" " + word, add_special_tokens=False)["input_ids"] == [
            guess
        ]:
            facts.append([subject, "capital", word])
    assert len(facts) >= 4, facts
    facts = [*facts[:4], ["Atlantis", "capital", "zzz"], ["Utopia", "capital", "qqq"]]
    path.write_text(json.dumps({"templates": {"capital": TEMPLATES}, "facts": facts}))
    return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny decoder, facts its base answers, and a causal-LM LoRA run of it (the FFN's down
    projection adapted too) trained hard on a short text."""
    root = tmp_path_factory.mktemp("compare")
    decoder = tiny_decoder(root)
    facts = known_facts_file(decoder, root / "facts.json")
    words = [*("the", "cat", "sat", "on", "a", "mat", "and", "the", "dog", "ran", "to"), "park"]
    generator = torch.Generator().manual_seed(0)
    lines = [
        " ".join(words[i] for i in torch.randint(len(words), (24,), generator=generator).tolist())
        for _ in range(24)
    ]
    (root / "train.txt").write_text("\n\n".join(lines) + "\n")
    train = TrainConfig(epochs=1, batch_size=8, learning_rate=5e-2, max_length=32, seed=0)
    method = {"lora": {"targets": ("query", "value", "ffn_out")}}
    spec = RunSpec.build(
        decoder, str(root / "train.txt"), method, train=train, data_options={"task": "causal-lm"}
    )
    execute(spec, root / "run", progress=False)
    return {"root": root, "decoder": decoder, "facts": facts, "run": root / "run"}


def _relative(found: torch.Tensor, expected: torch.Tensor) -> float:
    return float((found - expected).norm() / expected.norm())


@pytest.mark.parametrize("method", sorted(METHODS))
def test_the_base_through_disabled_attributes_as_a_base_loaded_alone(
    setup: dict[str, Any], method: str
) -> None:
    plain = decoder_lm(setup["decoder"])
    lm = adapted_lm(setup["decoder"], METHODS[method], scale=0.3)
    args = (TEMPLATES[0], "France", "paris")
    expected = attribute(plain, *args)
    with disabled(lm.model):
        base = attribute(lm, *args)
    adapted = attribute(lm, *args)
    assert base.probability == pytest.approx(expected.probability, rel=1e-5)
    assert _relative(base.scores, expected.scores) < 1e-4
    assert _relative(base.activations, expected.activations) < 1e-5
    assert _relative(adapted.scores, expected.scores) > 1e-2  # the adapter does change them


def _answer_probability(lm: KnowledgeLM, layer: int | None) -> tuple[float, int]:
    """P(answer) with block `layer`'s FFN intermediate activation zeroed at the answer
    position (None: as it runs), by a hook of this test's own."""
    query = token_queries(lm, TEMPLATES[0], "France", "paris")[0]

    def zero(_: object, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        x = args[0].clone()
        x[:, query.position] = 0
        return (x, *args[1:])

    handle = None if layer is None else lm.ffn_out[layer].register_forward_pre_hook(zero)
    try:
        with torch.no_grad():
            logits = lm.model(input_ids=query.input_ids[None]).logits[0, query.position]
    finally:
        if handle is not None:
            handle.remove()
    return float(logits.softmax(-1)[query.target]), query.target


@pytest.mark.parametrize("method", sorted(METHODS))
def test_the_adapted_models_neurons_are_its_down_projections_inputs(
    setup: dict[str, Any], method: str
) -> None:
    """Completeness on the adapted model: each layer's scores sum to P as it runs less P with
    that layer's intermediate activation zeroed, measured through the adapted layers."""
    lm = adapted_lm(setup["decoder"], METHODS[method], scale=0.3)
    found = attribute(lm, TEMPLATES[0], "France", "paris")
    whole, _ = _answer_probability(lm, None)
    assert found.probability == pytest.approx(whole, rel=1e-5)
    for layer in range(lm.num_layers):
        change = whole - _answer_probability(lm, layer)[0]
        assert abs(change) > 1e-3 * whole
        assert float(found.scores[layer].sum()) == pytest.approx(change, rel=5e-2)


def _facts(setup: dict[str, Any]) -> FactSet:
    return load_facts(str(setup["facts"])).of_relation("capital")


def test_an_adapter_that_changes_nothing_changes_no_answer_and_no_neuron(
    setup: dict[str, Any],
) -> None:
    lm = adapted_lm(setup["decoder"], METHODS["lora"])  # B = 0: the base's function
    rows = compare_facts(lm, _facts(setup), progress=False)
    outcomes = [row.outcome for row in rows]
    assert outcomes == ["kept"] * 4 + ["neither"] * 2
    for row in rows:
        assert row.base == row.adapted
    for row in rows[:4]:
        assert row.neurons is not None and row.neurons.base
        assert row.neurons.jaccard == 1.0 and row.neurons.lost == row.neurons.new == 0
        assert row.neurons.base_scores == pytest.approx(row.neurons.adapted_scores, rel=1e-4)
    summary = summarise(rows, lm.num_layers)
    assert summary["answered"] == {
        "base": 4, "adapted": 4, "kept": 4, "lost": 0, "gained": 0, "neither": 2,
    }  # fmt: skip
    assert summary["base_known"]["mean_jaccard"] == 1.0
    layers = summary["base_known"]["layers"]
    assert layers["base"] == layers["adapted"] and sum(layers["base"]) > 0


def test_answers_and_neurons_are_those_of_each_model_alone(setup: dict[str, Any]) -> None:
    """With a LoRA that moves the answers, each fact's base and adapted answers and neurons
    are what the base loaded alone and the adapted model give."""
    facts = _facts(setup)
    lm = adapted_lm(setup["decoder"], METHODS["lora"], scale=0.5)
    rows = compare_facts(lm, facts, progress=False)
    plain = decoder_lm(setup["decoder"])
    assert [row.fact for row in rows] == facts.facts  # no --limit: every fact
    for row, fact in zip(rows, facts.facts, strict=True):
        for answer, model in ((row.base, plain), (row.adapted, lm)):
            scores = fact_scores(model, facts, fact)
            assert answer.share == sum(s.correct for s in scores) / len(scores)
            mean = sum(s.probability for s in scores) / len(scores)
            assert answer.probability == pytest.approx(mean, rel=1e-5)
        if row.neurons is not None:
            alone = find_fact_neurons(plain, facts, fact)
            assert row.neurons.base == alone.neurons
            assert row.neurons.adapted == find_fact_neurons(lm, facts, fact).neurons
    assert any(row.base.probability != pytest.approx(row.adapted.probability) for row in rows)


def test_limit_counts_facts_either_model_answers(setup: dict[str, Any]) -> None:
    facts = _facts(setup)
    order = [*facts.facts[4:], *facts.facts[:4]]  # the two unanswered facts first
    lm = decoder_lm(setup["decoder"])
    rows = compare_facts(lm, facts.with_facts(order), limit=1, progress=False, base=nullcontext)
    assert [row.outcome for row in rows] == ["neither", "neither", "kept"]
    assert rows[0].neurons is None and rows[2].neurons is not None


def _found(neurons: list[tuple[int, int]]) -> FactNeurons:
    return FactNeurons(Fact("s", "r", "o"), neurons, [1.0] * len(neurons), 0.7, 0.5)


def _row(base: bool, adapted: bool, before: list[Any] | None, after: list[Any] | None) -> Any:
    neurons = None if before is None else overlap(_found(before), _found(after or []), 3)
    return FactComparison(
        Fact("s", "r", "o"),
        Answer(1.0 if base else 0.0, base, 0.8 if base else 0.1),
        Answer(1.0 if adapted else 0.0, adapted, 0.6 if adapted else 0.2),
        neurons,
    )


def test_a_hand_made_comparison_counts_as_expected() -> None:
    rows = [
        _row(True, True, [(0, 1), (2, 5)], [(0, 1), (2, 5)]),  # kept, the same neurons
        _row(True, True, [(0, 1), (1, 3)], [(0, 1), (2, 7)]),  # kept, one neuron moved
        _row(True, False, [(1, 3), (2, 5)], [(0, 2)]),  # lost, no neuron in common
        _row(False, True, [(2, 5)], [(2, 5), (2, 6), (1, 0)]),  # gained
        _row(False, False, None, None),
    ]
    moved = rows[1].neurons
    assert moved is not None
    assert (moved.jaccard, moved.kept, moved.lost, moved.new) == (pytest.approx(1 / 3), 1, 1, 1)
    assert (moved.base_layers, moved.adapted_layers) == ([1, 1, 0], [1, 0, 1])
    summary = summarise(rows, 3)
    assert summary["checked"] == 5
    assert summary["answered"] == {
        "base": 3, "adapted": 3, "kept": 2, "lost": 1, "gained": 1, "neither": 1,
    }  # fmt: skip
    assert summary["mean_probability"]["base"] == pytest.approx((0.8 * 3 + 0.1 * 2) / 5)
    base_known, adapted_known = summary["base_known"], summary["adapted_known"]
    assert base_known["facts"] == 3 and adapted_known["facts"] == 3
    assert base_known["mean_jaccard"] == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert adapted_known["mean_jaccard"] == pytest.approx((1 + 1 / 3 + 1 / 3) / 3)
    assert base_known["neurons"] == {"base": 6, "adapted": 5, "kept": 3, "lost": 3, "new": 2}
    assert base_known["layers"] == {"base": [2, 2, 2], "adapted": [3, 0, 2]}
    assert adapted_known["layers"] == {"base": [2, 1, 2], "adapted": [2, 1, 4]}
    assert overlap(_found([]), _found([]), 3).jaccard is None


def test_the_command_writes_compare_json_and_prints_the_tables(
    setup: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    run = setup["run"]
    args = ["neurons", "compare", "--adapter", str(run), "--facts", str(setup["facts"])]
    args += ["--model", setup["decoder"]]
    code, printed, err = run_cli(
        [*args, "--limit", "3", "--device", "cpu", "--no-progress"], capsys
    )
    assert code == 0, err
    folder = run / "neurons-compare"
    data = json.loads((folder / "compare.json").read_text())
    assert (data["task"], data["kind"], data["methods"]) == ("causal-lm", "causal", ["lora"])
    assert data["relation"] is None and data["limit"] == 3 and data["num_layers"] == 2
    summary, rows = data["summary"], data["rows"]
    answered = summary["answered"]
    assert summary["checked"] == len(rows) >= 3
    assert answered["kept"] + answered["lost"] + answered["gained"] == 3
    assert answered["base"] == answered["kept"] + answered["lost"]
    for row in rows:
        assert row["outcome"] in ("kept", "lost", "gained", "neither")
        assert (row["neurons"] is None) == (row["outcome"] == "neither")
        for model in ("base", "adapted"):
            assert 0 <= row[model]["probability"] <= 1
            assert row[model]["answered"] == (row[model]["share"] >= 0.5)
        if row["neurons"] is not None:
            found = row["neurons"]
            assert sum(found["layers"]["base"]) == len(found["base"])
            assert found["kept"] + found["lost"] == len(found["base"])
    base_known = summary["base_known"]
    assert base_known["facts"] == answered["base"]
    assert len(base_known["layers"]["base"]) == 2
    assert (folder / "compare.png").read_bytes().startswith(b"\x89PNG")
    assert "facts checked" in printed and "per layer" in printed and "compare.json" in printed
    # a second run replaces its own files; a relation the file lacks is one line
    code, _, err = run_cli([*args, "--limit", "1", "--device", "cpu", "--no-progress"], capsys)
    assert code == 0, err
    with unchanged(run):
        refused([*args, "--relation", "currency"], capsys, "no relation 'currency'")


def test_refusals_are_one_line_with_nothing_written(
    setup: dict[str, Any], trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    facts = str(setup["facts"])
    with unchanged(trained):
        refused(
            ["neurons", "compare", "--adapter", str(trained), "--facts", facts],
            capsys,
            "single_label",
            "causal-lm",
        )
        refused(
            ["neurons", "compare", "--adapter", str(trained), "--out", str(out)],
            capsys,
            "compare needs a run of one of",
        )
    assert not out.exists() and not (trained / "neurons-compare").exists()
    run = setup["run"]
    base = ["neurons", "compare", "--adapter", str(run), "--out", str(out)]
    refused([*base, "--facts", str(tmp_path / "missing.json")], capsys, "does not exist")
    refused([*base, "--facts", facts, "--limit", "0"], capsys, "--limit")
    refused([*base, "--facts", facts, "--min-correct", "2"], capsys, "--min-correct")
    refused([*base, "--facts", facts, "--steps", "3"], capsys, "riemann")
    assert not out.exists()
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    refused([*base, "--facts", facts], capsys, "notes.txt")
    refused(
        ["neurons", "compare", "--adapter", str(run), "--facts", facts, "--out", str(run)],
        capsys,
        "adapter",
    )
    with pytest.raises(ConfigError, match="compare needs"):
        run_compare(trained, facts)


@pytest.fixture(scope="module")
def mlm_run(tiny_model_dir: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A masked-LM LoRA run of the tiny BERT."""
    root = tmp_path_factory.mktemp("mlm")
    (root / "text.txt").write_text(
        "\n".join(f"the capital of land {i} is town {i}" for i in range(40))
    )
    train = TrainConfig(epochs=1, batch_size=16, learning_rate=1e-2, seed=0)
    spec = RunSpec.build(
        tiny_model_dir, str(root / "text.txt"), "lora", train=train, data_options={"task": "mlm"}
    )
    execute(spec, root / "run", progress=False)
    return root / "run"


def test_a_masked_lm_run_is_compared_at_its_masks(
    mlm_run: Path, tiny_model_dir: str, tmp_path: Path
) -> None:
    facts = tmp_path / "facts.json"
    rows = [["France", "capital", "paris"], ["Peru", "capital", "lima"]]
    facts.write_text(
        json.dumps({"templates": {"capital": ["[X]'s capital is [Y]."]}, "facts": rows})
    )
    report = run_compare(
        mlm_run, str(facts), min_correct=0.0, progress=False, rule="riemann", steps=4,
        model=tiny_model_dir,
    )  # fmt: skip
    data = json.loads((mlm_run / "neurons-compare" / "compare.json").read_text())
    assert data["kind"] == "masked" and data["task"] == "mlm"
    assert report.summary["answered"]["kept"] == 2  # min_correct 0: every fact is answered
    assert all(row.neurons is not None and row.neurons.base for row in report.rows)

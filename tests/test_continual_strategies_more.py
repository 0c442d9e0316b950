"""kd-representation, kd-contrastive and ewc on a tiny BERT: end to end, their teachers and
Fisher estimates, their penalties on hand-made cases, their option errors."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from cli_cases import run_cli
from test_continual_sequence import _stage_run, run_config, sequence

from adaptlab.continual import SEQUENCE_FILE, make_strategy, run_sequence
from adaptlab.continual.ewc import Anchor, ElasticWeightConsolidation, diagonal_fisher
from adaptlab.continual.labelled_run import HeadOutputs, HiddenStates, StageRun
from adaptlab.continual.registry import strategy_config
from adaptlab.continual.representation_distillation import info_nce
from adaptlab.continual.representations import mean_over_tokens
from adaptlab.continual.stage_loop import train_stage
from adaptlab.continual.stages import Row
from adaptlab.continual.strategy import Strategy
from adaptlab.errors import ConfigError


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("kd-representation", {"layers": "all", "weight": 2.0}),
        ("kd-contrastive", {"temperature": 0.5}),
        ("ewc", {"ewc_lambda": 100.0, "fisher_samples": 20}),
    ],
)
def test_each_strategy_runs_a_two_stage_sequence(
    name: str, options: dict[str, object], tiny_model_dir: str, stages: tuple[str, str]
) -> None:
    result = run_sequence(sequence(tiny_model_dir, stages, name, **options), progress=False)
    assert len(result.matrix) == 2 and all(len(row) == 2 for row in result.matrix)
    assert result.tests[1][0]["loss"] != result.tests[0][0]["loss"]  # the shared adapter moved
    written = result.to_dict()["spec"]["strategy"]
    assert written["name"] == name and written["config"].items() >= options.items()


def _after_first_stage(tiny_model_dir: str, stages: tuple[str, str], first: Strategy) -> StageRun:
    """Stage 1 ready to train: stage 0 trained with `first`, stage 1's head selected."""
    run = _stage_run(tiny_model_dir, stages, 0)
    train_stage(run, first, run_config(), 5e-3, progress=False)
    run.heads.select(1)
    run.heads.train_only(1)
    return replace(run, index=1)


def student_hidden(run: StageRun, rows: list[Row]) -> HiddenStates:
    """The model's hidden states for `rows` in evaluation mode, as the stage loop builds them."""
    run.model.eval()
    features = [run.stages[stage].train[index] for stage, index in rows]
    batch = run.stage.encoder.collate(features)
    batch.pop("labels")
    with torch.no_grad():
        states = run.model(**batch, output_hidden_states=True).hidden_states
    return HiddenStates(tuple(states), batch["attention_mask"])


def parameters(run: StageRun) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in run.model.named_parameters()}


@pytest.mark.parametrize("layers", ["last", "all"])
def test_representation_teacher_is_frozen_and_the_penalty_starts_at_zero(
    layers: str, tiny_model_dir: str, stages: tuple[str, str]
) -> None:
    sequential = make_strategy(strategy_config("sequential"))
    run = _after_first_stage(tiny_model_dir, stages, sequential)
    kd = make_strategy(strategy_config("kd-representation", {"layers": layers}))
    assert kd.hidden_states
    before = parameters(run)
    kd.begin(run)
    for name, value in parameters(run).items():  # caching the teacher changes nothing
        torch.testing.assert_close(value, before[name], rtol=0, atol=0)
    teacher = kd.teacher  # type: ignore[attr-defined]
    examples = len(run.stage.train)
    assert teacher.shape == (1 if layers == "last" else 2, examples, 32)
    assert not teacher.requires_grad
    every = [(1, i) for i in range(examples)]
    hidden = student_hidden(run, every)
    chosen = hidden.layers[-1:] if layers == "last" else hidden.layers[1:]
    torch.testing.assert_close(teacher, mean_over_tokens(chosen, hidden.mask))
    rows: list[Row] = [(1, 3), (0, 5), (1, 7), (1, 0)]  # a replayed row has no teacher
    assert kd.penalty(
        run, rows, HeadOutputs([], student_hidden(run, rows))
    ).item() == pytest.approx(0.0, abs=1e-10)
    kept = teacher.clone()
    train_stage(run, kd, run_config(), 5e-3, progress=False)
    torch.testing.assert_close(kd.teacher, kept, rtol=0, atol=0)  # type: ignore[attr-defined]
    assert kd.penalty(run, rows, HeadOutputs([], student_hidden(run, rows))).item() > 1e-8
    assert kd.penalty(run, [(0, 1)], HeadOutputs([], student_hidden(run, [(0, 1)]))) is None


def test_representation_penalty_is_the_weighted_squared_error(
    tiny_model_dir: str, stages: tuple[str, str]
) -> None:
    run = _stage_run(tiny_model_dir, stages, 1)
    kd = make_strategy(strategy_config("kd-representation", {"weight": 3.0}))
    kd.begin(run)
    rows: list[Row] = [(1, 0), (1, 1)]
    hidden = student_hidden(run, rows)
    shifted = HiddenStates(tuple(h + 0.5 for h in hidden.layers), hidden.mask)
    assert kd.penalty(run, rows, HeadOutputs([], shifted)).item() == pytest.approx(
        3.0 * 0.25, rel=1e-4
    )


def test_contrastive_penalty_closed_form_and_its_teacher(
    tiny_model_dir: str, stages: tuple[str, str]
) -> None:
    # three orthonormal representations, the student agreeing: -log(e^(1/T) / (e^(1/T) + 2))
    eye = torch.eye(3, 8)
    assert info_nce(eye, eye, 0.5).item() == pytest.approx(math.log(1 + 2 * math.exp(-2.0)))
    assert info_nce(eye.flip(0), eye, 0.5).item() > info_nce(eye, eye, 0.5).item()
    sequential = make_strategy(strategy_config("sequential"))
    run = _after_first_stage(tiny_model_dir, stages, sequential)
    kd = make_strategy(strategy_config("kd-contrastive", {"weight": 2.0, "temperature": 0.1}))
    kd.begin(run)
    teacher = kd.teacher  # type: ignore[attr-defined]
    assert teacher.shape == (1, len(run.stage.train), 32) and not teacher.requires_grad
    rows: list[Row] = [(1, 0), (1, 1), (1, 2), (0, 4)]
    agreeing = kd.penalty(run, rows, HeadOutputs([], student_hidden(run, rows))).item()
    # The teacher was pooled in batches of 16, the student here in one of 4: on some CPUs they
    # round apart by about 1e-7, and T = 0.1 scales that up to about 1e-6 of the penalty.
    same = 2.0 * info_nce(teacher[0, :3], teacher[0, :3], 0.1).item()
    assert agreeing == pytest.approx(same, rel=1e-4)
    crossed = [(1, 1), (1, 0), (1, 2), (0, 4)]  # the student sees rows 0 and 1 swapped
    assert kd.penalty(run, rows, HeadOutputs([], student_hidden(run, crossed))).item() > agreeing
    kept = teacher.clone()
    train_stage(run, kd, run_config(), 5e-3, progress=False)
    torch.testing.assert_close(kd.teacher, kept, rtol=0, atol=0)  # type: ignore[attr-defined]


def test_fisher_is_non_negative_and_only_over_trainable_tensors(
    tiny_model_dir: str, stages: tuple[str, str]
) -> None:
    run = _stage_run(tiny_model_dir, stages, 0)
    before = parameters(run)
    fisher = diagonal_fisher(run, 25)
    trainable = {name for name, p in run.model.named_parameters() if p.requires_grad}
    assert set(fisher) == trainable and not any(".heads.1." in name for name in fisher)
    assert all(bool((f >= 0).all()) for f in fisher.values())
    assert sum(float(f.sum()) for f in fisher.values()) > 0
    for name, value in parameters(run).items():
        torch.testing.assert_close(value, before[name], rtol=0, atol=0)
    assert all(p.grad is None for p in run.model.parameters())
    again = diagonal_fisher(run, 25)  # the draw is seeded
    for name, value in fisher.items():
        torch.testing.assert_close(again[name], value)


def test_ewc_penalty_matches_the_closed_form_over_two_stages() -> None:
    stars = [torch.tensor([1.0, -2.0, 0.5, 3.0]), torch.tensor([0.0, 1.0, 1.5, 2.0])]
    fishers = [torch.tensor([0.5, 0.0, 2.0, 1.0]), torch.tensor([1.5, 0.0, 0.0, 4.0])]
    weight = torch.nn.Parameter(stars[0].clone())
    anchor = Anchor(weight, torch.zeros(4), weight.detach().clone())
    for star, fisher in zip(stars, fishers, strict=True):  # stage k ends at θ*_k
        with torch.no_grad():
            weight.copy_(star)
        anchor.add(fisher)
    with torch.no_grad():
        weight.copy_(torch.tensor([0.3, 7.0, -1.0, 2.5]))
    theta = weight.detach()
    terms = [f * (theta - star) ** 2 for f, star in zip(fishers, stars, strict=True)]
    ewc = make_strategy(strategy_config("ewc", {"ewc_lambda": 10.0}))
    assert isinstance(ewc, ElasticWeightConsolidation)
    ewc.anchors = {"weight": anchor}
    penalty = ewc.penalty(None, [], [])  # type: ignore[arg-type]
    assert penalty is not None
    assert penalty.item() == pytest.approx(10.0 / 2 * float(sum(t.sum() for t in terms)))
    penalty.backward()  # d/dθ = λ sum_k F_k (θ - θ*_k)
    pulls = [f * (theta - star) for f, star in zip(fishers, stars, strict=True)]
    torch.testing.assert_close(weight.grad, 10.0 * (pulls[0] + pulls[1]))


def test_ewc_penalty_is_zero_as_the_next_stage_starts_and_grows_after_a_step(
    tiny_model_dir: str, stages: tuple[str, str]
) -> None:
    ewc = make_strategy(strategy_config("ewc", {"fisher_samples": 30}))
    assert isinstance(ewc, ElasticWeightConsolidation)
    run = _after_first_stage(tiny_model_dir, stages, ewc)  # end() of stage 0 took the Fisher
    adapter = {name for name, p in run.model.named_parameters() if p.requires_grad}
    assert {name for name in adapter if ".heads.1." not in name} <= set(ewc.anchors)
    start = ewc.penalty(run, [], [])
    assert start is not None and start.item() == 0.0
    anchors = {name: a.importance.clone() for name, a in ewc.anchors.items()}
    train_stage(run, ewc, run_config(), 5e-3, progress=False)
    moved = ewc.penalty(run, [], [])
    assert moved is not None and moved.item() > 0
    for name, importance in anchors.items():  # the last stage's Fisher is not taken
        torch.testing.assert_close(ewc.anchors[name].importance, importance, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("kd-representation", {"layers": "middle"}, "layers must be one of last, all"),
        ("kd-representation", {"weight": -1.0}, "weight must be >= 0"),
        ("kd-representation", {"layers": 2}, "layers must be a str"),
        ("kd-contrastive", {"temperature": 0.0}, "temperature must be > 0"),
        ("kd-contrastive", {"tau": 0.1}, "unknown option 'tau'; options: weight, temperature"),
        ("ewc", {"ewc_lambda": -1.0}, "ewc_lambda must be >= 0"),
        ("ewc", {"fisher_samples": 0}, "fisher_samples must be >= 1"),
        ("ewc", {"fisher_samples": 1.5}, "fisher_samples must be an int"),
        ("ewc", {"lambda": 5.0}, "unknown option 'lambda'; options: ewc_lambda, fisher_samples"),
    ],
)
def test_bad_options_are_refused(name: str, options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        strategy_config(name, options)


def test_cli_runs_ewc_with_lora_and_refuses_a_bad_option(
    tiny_model_dir: str,
    stages: tuple[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = [
        "sequence", "--model", tiny_model_dir, "--stages", ",".join(stages),
        "--strategy", "ewc", "--method", "lora", "--epochs", "1", "--batch-size", "8",
        "--learning-rate", "0.005", "--no-progress",
    ]  # fmt: skip
    out = tmp_path / "seq"
    code, printed, err = run_cli([*base, "-s", "fisher_samples=10", "--out", str(out)], capsys)
    assert code == 0, err
    written = json.loads((out / SEQUENCE_FILE).read_text())
    assert written["spec"]["strategy"] == {
        "name": "ewc",
        "config": {"ewc_lambda": 1000.0, "fisher_samples": 10},
    }
    assert "BWT" in printed
    code, _, err = run_cli([*base, "-s", "fisher_samples=0", "--out", str(tmp_path / "o")], capsys)
    assert code == 1
    assert "ewc: fisher_samples must be >= 1, got 0" in err and "Traceback" not in err

"""Continual strategies defined here, outside the package, each registered once by the file
that defines it: listed and described from what they declare, run through a classification
sequence like the built-in ones, and refused, with the computed message, by the objectives
they do not declare."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch
from cli_cases import run_cli
from test_continual_lm import LM_STUDY
from test_continual_sequence import sequence

from adaptlab.continual import (
    Strategy,
    StrategyConfig,
    StrategyEntry,
    list_strategies,
    register_strategy,
    run_sequence,
    strategy_config,
)
from adaptlab.continual.labelled_run import HeadOutputs, StageRun
from adaptlab.continual.registry import make_strategy, strategies_for
from adaptlab.continual.spec import SequenceSpec
from adaptlab.continual.stages import Row
from adaptlab.errors import ConfigError


@dataclass(frozen=True)
class ShrinkConfig(StrategyConfig):
    """`weight` of the mean squared score of the stage's head."""

    name = "toy-shrink"
    weight: float = 0.5


class Shrink(Strategy):
    """Pulls the scores of the stage's head towards zero; logs what it was called for."""

    config: ShrinkConfig
    log: ClassVar[list[tuple[str, int, float]]] = []
    """(hook, stage, penalty) of every call, across runs: what a test can observe."""

    def begin(self, run: StageRun) -> None:
        self.log.append(("begin", run.index, 0.0))

    def penalty(
        self, run: StageRun, rows: Sequence[Row], outputs: HeadOutputs
    ) -> torch.Tensor | None:
        term = self.config.weight * outputs.scores[run.index].pow(2).mean()
        self.log.append(("penalty", run.index, term.item()))
        return term

    def end(self, run: StageRun) -> None:
        self.log.append(("end", run.index, 0.0))


register_strategy(
    StrategyEntry(
        "toy-shrink",
        ShrinkConfig,
        "the stage head's scores pulled towards zero",
        runs_on={"classification": Shrink},
    )
)


@dataclass(frozen=True)
class CorpusOnlyConfig(StrategyConfig):
    """No options."""

    name = "toy-corpus-only"


register_strategy(
    StrategyEntry(
        "toy-corpus-only",
        CorpusOnlyConfig,
        "plain training, declared for causal-LM sequences only",
        runs_on={"causal-lm": Strategy},
    )
)


def test_a_registered_strategy_is_listed_with_what_it_declares() -> None:
    names = [entry.name for entry in list_strategies()]
    assert names[:2] == ["sequential", "kd-logit"]  # adaptlab's own first
    assert names[-2:] == ["toy-shrink", "toy-corpus-only"]
    shrink = next(entry for entry in list_strategies() if entry.name == "toy-shrink")
    assert shrink.objectives == ("classification",) and shrink.options == {"weight": 0.5}
    assert "toy-shrink" in strategies_for("classification")
    assert "toy-shrink" not in strategies_for("causal-lm")
    assert "toy-corpus-only" in strategies_for("causal-lm")
    assert strategy_config("toy-shrink", {"weight": 2}) == ShrinkConfig(weight=2.0)
    with pytest.raises(ConfigError, match="toy-shrink: unknown option 'rate'; options: weight"):
        strategy_config("toy-shrink", {"rate": 0.1})


def test_the_sequence_help_describes_a_registered_strategy(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("TERMINAL_WIDTH", "200")
    # The help is made when the command's module is imported: import it again now that the
    # strategies of this file are registered (an earlier test may have imported it before).
    importlib.reload(importlib.import_module("adaptlab.cli.sequence_cmd"))
    code, out, _ = run_cli(["sequence", "--help"], capsys)
    assert code == 0
    assert (
        "toy-shrink -s weight=0.5: the stage head's scores pulled towards zero. "
        "Objectives: classification." in out
    )
    assert "toy-corpus-only: plain training, declared for causal-LM sequences only. " in out
    assert "replay -s rate=0.01: earlier stages' examples join each batch. " in out


def test_a_registered_strategy_runs_a_classification_sequence(
    tiny_model_dir: str, stages: tuple[str, str]
) -> None:
    Shrink.log.clear()
    result = run_sequence(
        sequence(tiny_model_dir, stages, "toy-shrink", weight=5.0), progress=False
    )
    hooks = [(hook, stage) for hook, stage, _ in Shrink.log if hook != "penalty"]
    assert hooks == [("begin", 0), ("end", 0), ("begin", 1), ("end", 1)]
    terms = {
        stage: [t for hook, s, t in Shrink.log if hook == "penalty" and s == stage]
        for stage in (0, 1)
    }
    assert all(terms[stage] and min(terms[stage]) > 0 for stage in (0, 1))
    assert result.to_dict()["spec"]["strategy"] == {"name": "toy-shrink", "config": {"weight": 5.0}}
    plain = run_sequence(sequence(tiny_model_dir, stages, "sequential"), progress=False)
    # the penalty trained too: the losses differ by far more than rounding
    assert result.tests[1][0]["loss"] != pytest.approx(plain.tests[1][0]["loss"], abs=1e-3)


def test_an_objective_a_strategy_does_not_declare_is_refused() -> None:
    takes = ", ".join(strategies_for("causal-lm"))
    assert takes.startswith("sequential") and takes.endswith("toy-corpus-only")
    refusal = (
        f"strategy toy-shrink is for classification sequences; a causal-lm sequence takes {takes}"
    )
    with pytest.raises(ConfigError) as refused:
        SequenceSpec.build("m", ["a", "b"], strategy="toy-shrink", objective="causal-lm")
    assert str(refused.value) == refusal
    with pytest.raises(ConfigError) as refused:
        make_strategy(strategy_config("toy-shrink"), "causal-lm")
    assert str(refused.value) == refusal
    with pytest.raises(ConfigError) as refused:
        SequenceSpec.build("m", ["a"], strategy="toy-corpus-only")
    assert str(refused.value) == (
        "strategy toy-corpus-only is for causal-lm sequences; a classification sequence takes "
        + ", ".join(strategies_for("classification"))
    )
    spec = SequenceSpec.build("m", ["a", "b"], strategy="toy-corpus-only", objective="causal-lm")
    assert SequenceSpec.from_dict(spec.to_dict()).strategy == CorpusOnlyConfig()


def test_a_causal_lm_study_refuses_a_strategy_without_that_objective() -> None:
    from adaptlab.study.spec import StudySpec

    data = {**LM_STUDY, "strategies": ["sequential", {"toy-shrink": {"weight": 1.0}}]}
    takes = ", ".join(strategies_for("causal-lm"))
    with pytest.raises(ValueError) as refused:
        StudySpec.model_validate(data)
    assert (
        f"strategy toy-shrink is for classification sequences; objective: causal-lm takes {takes}"
        in str(refused.value)
    )
    StudySpec.model_validate({**data, "strategies": ["toy-corpus-only"]})

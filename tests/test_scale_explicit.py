"""The scale passed explicitly: preparing a base leaves its `forward` the class's own, and every
pass over a run's or a sequence's model (training, dev, test, analyses, strategies' passes,
the tests after each stage) runs under autocast at the spec's precision, entered by whoever
runs it; RSA stays float32 under a caller's autocast."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_cases import write_reviews
from tiny_models import tiny_model
from torch import nn

import adaptlab.continual.labelled_stages as labelled_stages
import adaptlab.runs.labelled_run as labelled_run
from adaptlab.analysis.rsa import rsa
from adaptlab.continual import SequenceSpec, run_sequence
from adaptlab.continual.labelled_run import StageRun
from adaptlab.engine.precision import autocast_at
from adaptlab.engine.scale_model import prepare_base
from adaptlab.engine.trained_run import TrainedRun
from adaptlab.records.config import TrainConfig
from adaptlab.records.scale import Scale
from adaptlab.runs.evaluation import evaluate
from adaptlab.runs.labelled_objective import Classification
from adaptlab.runs.run import RunSpec, execute

Pass = tuple[str, bool, bool, torch.dtype]
"""One forward pass seen: its phase, the model's training mode, whether CPU autocast was on,
and its dtype."""


class Passes:
    """Every forward pass of the models `prepare_base` prepares while inside `watching`."""

    def __init__(self) -> None:
        self.phase = "train"
        self.seen: list[Pass] = []

    def record(self, model: nn.Module, *_: Any) -> None:
        enabled = torch.is_autocast_enabled("cpu")
        self.seen.append((self.phase, model.training, enabled, torch.get_autocast_dtype("cpu")))

    @contextmanager
    def during(self, phase: str) -> Iterator[None]:
        """Passes inside count as `phase`'s."""
        before, self.phase = self.phase, phase
        try:
            yield
        finally:
            self.phase = before

    def phased(self, method: Callable[..., Any], phase: str) -> Callable[..., Any]:
        """`method` with its passes counted as `phase`'s."""

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with self.during(phase):
                return method(*args, **kwargs)

        return wrapped

    def preparing(self, models: list[nn.Module]) -> Callable[..., None]:
        """`prepare_base`, hooking every model it prepares and keeping it in `models`."""

        def prepare(model: nn.Module, scale: Scale, device: torch.device) -> None:
            prepare_base(model, scale, device)
            model.register_forward_pre_hook(self.record)
            models.append(model)

        return prepare


def class_forward(model: nn.Module) -> bool:
    """Whether `model.forward` is its class's own, not one set on the object."""
    return "forward" not in vars(model) and model.forward.__func__ is type(model).forward  # type: ignore[attr-defined]


def test_prepare_base_leaves_forward_alone_and_enters_no_autocast() -> None:
    model = tiny_model("bert", num_labels=2)
    prepare_base(model, Scale("bf16", gradient_checkpointing=True), torch.device("cpu"))
    assert class_forward(model)
    inputs = {"input_ids": torch.tensor([[5, 6, 7]]), "attention_mask": torch.ones(1, 3).long()}
    model.eval()
    assert model(**inputs).logits.dtype == torch.float32  # no autocast came with the model
    with autocast_at("bf16", torch.device("cpu")):
        assert model(**inputs).logits.dtype == torch.bfloat16
    with autocast_at("fp32", torch.device("cpu")):
        assert not torch.is_autocast_enabled("cpu")


@pytest.mark.parametrize(("precision", "autocast"), [("bf16", True), ("fp32", False)])
def test_every_pass_of_a_run_is_at_its_precision(
    precision: str,
    autocast: bool,
    tiny_model_dir: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    passes, models = Passes(), []
    monkeypatch.setattr(labelled_run, "prepare_base", passes.preparing(models))
    monkeypatch.setattr(Classification, "dev", passes.phased(Classification.dev, "dev"))
    test = passes.phased(labelled_run.ClassificationRun.test, "test")
    monkeypatch.setattr(labelled_run.ClassificationRun, "test", test)

    def analyse(run: TrainedRun) -> Mapping[str, Any]:
        with passes.during("analysis"):
            dev = evaluate(run.model, run.encoder, run.features["dev"], "single_label", ["a", "b"])
        return {"dev_loss": dev.loss}

    train = TrainConfig(epochs=2, batch_size=8, learning_rate=5e-3, seed=0)
    data = str(write_reviews(tmp_path / "reviews.csv"))
    spec = RunSpec.build(tiny_model_dir, data, "lora", train=train, scale=Scale(precision))
    result = execute(spec, progress=False, on_trained=analyse)
    assert result.analysis is not None and "dev_loss" in result.analysis
    (model,) = models
    assert class_forward(model)
    assert {phase for phase, *_ in passes.seen} == {"train", "dev", "test", "analysis"}
    assert {training for phase, training, *_ in passes.seen if phase == "train"} == {True}
    assert {(enabled, dtype) for *_, enabled, dtype in passes.seen} == {(autocast, torch.bfloat16)}
    assert not torch.is_autocast_enabled("cpu")  # nothing left entered


@pytest.mark.parametrize(
    ("strategy", "options"), [("kd-logit", {}), ("ewc", {"fisher_samples": 4})]
)
def test_every_pass_of_a_bf16_sequence_is_under_autocast(
    strategy: str,
    options: dict[str, Any],
    tiny_model_dir: str,
    stages: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    passes, models = Passes(), []
    monkeypatch.setattr(labelled_stages, "prepare_base", passes.preparing(models))
    monkeypatch.setattr(StageRun, "dev", passes.phased(StageRun.dev, "dev"))
    test = passes.phased(labelled_stages.LabelledStages.test, "test")
    monkeypatch.setattr(labelled_stages.LabelledStages, "test", test)
    train = TrainConfig(epochs=2, batch_size=8, learning_rate=5e-3, seed=0)
    spec = SequenceSpec.build(
        tiny_model_dir, stages, "houlsby", strategy, options, train=train, scale=Scale("bf16")
    )
    result = run_sequence(spec, progress=False)
    assert len(result.matrix) == 2
    (model,) = models
    assert class_forward(model)
    # kd-logit's teacher passes (begin) and ewc's Fisher passes (end) are outside the loop
    outside = [p for p in passes.seen if p[0] == "train" and not p[1]]
    assert outside, "the strategy ran no pass of its own"
    assert {phase for phase, *_ in passes.seen} == {"train", "dev", "test"}
    assert {(enabled, dtype) for *_, enabled, dtype in passes.seen} == {(True, torch.bfloat16)}


def test_rsa_stays_float32_under_a_callers_autocast() -> None:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(40, 16, generator=generator)
    y = x + 0.05 * torch.randn(40, 16, generator=generator)
    plain = rsa(x, y)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        under = rsa(x, y)
    assert under == pytest.approx(plain, abs=1e-6)


def test_weights_changed_inside_the_precision_context_are_read_afresh() -> None:
    layer = nn.Linear(4, 4)  # a trained tensor: float32, requires grad
    inputs = torch.ones(1, 4)
    with torch.no_grad(), autocast_at("bf16", torch.device("cpu")):
        before = layer(inputs)
        layer.weight.add_(1.0)  # as a loss landscape moves the trained weights
        after = layer(inputs)
    assert after.dtype == torch.bfloat16
    assert torch.allclose(after.float(), before.float() + 4.0, atol=0.1)

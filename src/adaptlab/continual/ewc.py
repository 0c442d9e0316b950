"""`ewc`: Elastic Weight Consolidation (Kirkpatrick et al. 2017, "Overcoming catastrophic
forgetting in neural networks").

After stage k trains, the diagonal of the Fisher information of its trainable tensors is
estimated on up to `fisher_samples` of its training examples, drawn with the run's seed:
F_i = mean over examples of (d log p(y | x, θ) / dθ_i)^2 at the stage's final weights θ*_k,
each example's gradient taken alone, in evaluation mode, with y the example's label (the
empirical Fisher, as most implementations compute it; the true Fisher takes the expectation
over the model's own predictions instead; Kunstner et al. 2019 compare the two). While a
later stage trains, the loss gains the penalty of Eq. 3,

    (λ / 2) * sum over earlier stages k of sum_i F_k,i (θ_i - θ*_k,i)^2,

one quadratic per earlier stage, as the paper keeps one per earlier task (§2, the third task;
not the decayed online variant of Schwarz et al. 2018). A sum of quadratics is itself one:
with A = sum_k F_k, m = sum_k F_k θ*_k / A and c = sum_k F_k θ*_k^2 - A m^2, the penalty is
(λ / 2) (sum_i A_i (θ_i - m_i)^2 + c), so two tensors the size of the trainable ones are kept
however many stages went by. λ = `ewc_lambda` (default 1000, the value of
PyCIL's EWC baseline, Zhou et al. 2023; the paper tunes it per experiment, and its scale
depends on the model and the data: tune it).

The Fisher of the last stage is not estimated: nothing trains after it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from adaptlab.continual.labelled_run import StageRun
from adaptlab.continual.registry import StrategyEntry, register_strategy
from adaptlab.continual.stages import Row
from adaptlab.continual.strategy import Strategy, StrategyConfig, check_number
from adaptlab.errors import ConfigError


@dataclass(frozen=True)
class EWCConfig(StrategyConfig):
    """`ewc_lambda`: λ of the penalty; `fisher_samples`: training examples per Fisher estimate."""

    name = "ewc"
    ewc_lambda: float = 1000.0
    fisher_samples: int = 1000

    def __post_init__(self) -> None:
        check_number(self.name, "ewc_lambda", self.ewc_lambda)
        if self.fisher_samples < 1:
            raise ConfigError(f"ewc: fisher_samples must be >= 1, got {self.fisher_samples!r}")


_PARTS = ("importance", "centre", "offset")
"""What the saved state keeps of each anchored tensor, as `<name>/<part>`."""


@dataclass
class Anchor:
    """One parameter's quadratics of earlier stages, summed: A (θ - m)^2 + c."""

    parameter: nn.Parameter
    importance: torch.Tensor
    """A = sum_k F_k."""
    centre: torch.Tensor
    """m = sum_k F_k θ*_k / A; the latest θ*_k where A = 0."""
    offset: float = 0.0
    """c = sum_k F_k θ*_k^2 - A m^2, summed over the tensor (>= 0; 0 after one stage)."""

    def add(self, fisher: torch.Tensor) -> None:
        """Fold in one stage's Fisher `fisher`, taken at the parameter's present value θ*:
        A' = A + F, m' = (A m + F θ*) / A', c' = c + A F (m - θ*)^2 / A'."""
        theta = self.parameter.detach().double()
        before, centre, fisher = self.importance.double(), self.centre.double(), fisher.double()
        total = before + fisher
        spread = torch.where(total > 0, before * fisher / total.clamp(min=1e-300), 0.0)
        self.offset += float((spread * (centre - theta) ** 2).sum())
        moved = torch.where(
            total > 0, (before * centre + fisher * theta) / total.clamp(min=1e-300), theta
        )
        self.importance = total.to(self.importance.dtype)
        self.centre = moved.to(self.centre.dtype)

    def penalty(self) -> torch.Tensor:
        """sum_i A_i (θ_i - m_i)^2 + c, differentiable in θ."""
        return (self.importance * (self.parameter - self.centre) ** 2).sum() + self.offset


class ElasticWeightConsolidation(Strategy[StageRun, Any]):
    """Pull the trainable tensors towards each earlier stage's weights, each coordinate by
    how much that stage's log-likelihood depends on it."""

    config: EWCConfig

    def __init__(self, config: EWCConfig) -> None:
        super().__init__(config)
        self.anchors: dict[str, Anchor] = {}
        """By parameter name: the quadratic of every stage that trained it so far."""

    def end(self, run: StageRun) -> None:
        if run.index == len(run.stages) - 1:
            return
        for name, fisher in diagonal_fisher(run, self.config.fisher_samples).items():
            anchor = self.anchors.get(name)
            if anchor is None:
                parameter = dict(run.model.named_parameters())[name]
                anchor = Anchor(parameter, torch.zeros_like(fisher), parameter.detach().clone())
                self.anchors[name] = anchor
            anchor.add(fisher)

    def state(self) -> dict[str, torch.Tensor]:
        tensors = {}
        for name, anchor in self.anchors.items():
            tensors[f"{name}/importance"] = anchor.importance
            tensors[f"{name}/centre"] = anchor.centre
            tensors[f"{name}/offset"] = torch.tensor(anchor.offset, dtype=torch.float64)
        return tensors

    def load_state(self, model: nn.Module, tensors: Mapping[str, torch.Tensor]) -> None:
        parameters = dict(model.named_parameters())
        for name in sorted({key.rsplit("/", 1)[0] for key in tensors}):
            if name not in parameters:
                raise ConfigError(f"ewc: the saved state names {name!r}, not a tensor of the model")
            parameter = parameters[name]
            importance, centre, offset = (tensors.get(f"{name}/{p}") for p in _PARTS)
            if (
                importance is None
                or centre is None
                or offset is None
                or importance.shape != parameter.shape
                or centre.shape != parameter.shape
                or offset.numel() != 1
                or bool((importance < 0).any())
                or float(offset) < 0
            ):
                raise ConfigError(
                    f"ewc: the saved state of {name!r} is no quadratic of it (importance >= 0 "
                    "and centre of its shape, one offset >= 0)"
                )
            self.anchors[name] = Anchor(
                parameter,
                importance.to(parameter.device),
                centre.to(parameter.device),
                float(offset),
            )
        unknown = sorted(key for key in tensors if key.rsplit("/", 1)[-1] not in _PARTS)
        if unknown:
            raise ConfigError(f"ewc: the saved state holds {unknown[0]!r}, which ewc does not keep")

    def penalty(self, run: StageRun, rows: Sequence[Row], outputs: Any) -> torch.Tensor | None:
        if not self.anchors:
            return None
        total = torch.stack([anchor.penalty() for anchor in self.anchors.values()]).sum()
        return self.config.ewc_lambda / 2 * total


def diagonal_fisher(run: StageRun, samples: int) -> dict[str, torch.Tensor]:
    """By name, for every trainable tensor: the mean over up to `samples` of the stage's
    training examples (seeded draw) of the squared gradient of the example's log-likelihood
    of its label under the stage's head, one example at a time, in evaluation mode."""
    model, heads, stage = run.model, run.heads, run.stage
    device = next(model.parameters()).device
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    generator = torch.Generator().manual_seed(run.seed + run.index)
    picks = torch.randperm(len(stage.train), generator=generator)[:samples].tolist()
    sums = [torch.zeros_like(p) for _, p in named]
    was_training = model.training
    model.eval()
    heads.select(run.index)
    try:
        for index in picks:
            batch = {
                k: v.to(device) for k, v in stage.encoder.collate([stage.train[index]]).items()
            }
            label = batch.pop("labels")
            logits = model(**batch).logits
            log_likelihood = F.log_softmax(logits.float(), dim=-1)[0, label[0]]
            grads = torch.autograd.grad(log_likelihood, [p for _, p in named], allow_unused=True)
            for total, grad in zip(sums, grads, strict=True):
                if grad is not None:
                    total += grad.detach() ** 2
    finally:
        model.train(was_training)
    return {name: total / len(picks) for (name, _), total in zip(named, sums, strict=True)}


register_strategy(
    StrategyEntry(
        "ewc",
        EWCConfig,
        "trainable tensors held near earlier stages' weights, by their Fisher information",
        runs_on={"classification": ElasticWeightConsolidation},
    )
)

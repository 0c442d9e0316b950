"""One task head per stage on one model (task-incremental classification).

`StageHeads.install` puts a switch where the model's classification head was: it holds a head
per stage (a copy of the model's own head, its output layer sized for the stage's labels and
freshly initialised) and runs the one `select` picked, or, while `collecting`, every head up to
the selected one on the same features (what replay and distillation need, at the cost of the
small heads only). A pooler that feeds the head (BERT's) moves into each stage's head, so
nothing stage-specific stays shared.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from adaptlab.backbone.discovery import find_backbone
from adaptlab.backbone.parts import get_module
from adaptlab.errors import ConfigError


class StageHeads(nn.Module):
    """The per-stage heads of a model; `outputs` holds every head's output while collecting."""

    _model: Any  # a transformers model; `num_labels` is set per stage

    def __init__(self, heads: Sequence[nn.Module], model: nn.Module) -> None:
        super().__init__()
        self.heads = nn.ModuleList(heads)
        self.label_counts = [_output_layer(h).out_features for h in heads]
        self.current = 0
        self.collecting = False
        self.outputs: list[torch.Tensor] = []
        object.__setattr__(self, "_model", model)  # not a submodule: no cycle

    @classmethod
    def install(cls, model: nn.Module, label_counts: Sequence[int], seed: int) -> StageHeads:
        """Replace `model`'s head by one head per stage (stage k's from seed `seed + k`)."""
        parts = find_backbone(model)
        poolers = [name for name in parts.head if "." in name]  # inside the base model
        outside = [name for name in parts.head if name not in poolers]
        if len(outside) != 1 or len(poolers) > 1:
            raise ConfigError(
                f"a sequence needs a model whose task head is one module; "
                f"{type(model).__name__} has {', '.join(outside) or 'none'}"
            )
        head = get_module(model, outside[0])
        std = float(getattr(getattr(model, "config", None), "initializer_range", 0.02))
        prefix = [get_module(model, poolers[0])] if poolers else []
        heads = [
            nn.Sequential(*(copy.deepcopy(m) for m in prefix), _resized(head, count, std, seed + k))
            for k, count in enumerate(label_counts)
        ]
        switch = cls(heads, model)
        if poolers:
            _replace(model, poolers[0], nn.Identity())
        _replace(model, outside[0], switch)
        switch.select(0)
        return switch

    def select(self, stage: int) -> None:
        """Run stage `stage`'s head (the loss the model computes uses its label count)."""
        if not 0 <= stage < len(self.heads):
            raise ConfigError(f"no head for stage {stage}; the sequence has {len(self.heads)}")
        self.current = stage
        self._model.num_labels = self.label_counts[stage]  # HF sizes its loss by it

    def train_only(self, stage: int) -> None:
        """Stage `stage`'s head trains; every other head is frozen."""
        for k, head in enumerate(self.heads):
            head.requires_grad_(k == stage)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if not self.collecting:
            return self.heads[self.current](features)  # type: ignore[no-any-return]
        self.outputs = [head(features) for head in self.heads[: self.current + 1]]
        return self.outputs[self.current]


def _output_layer(head: nn.Module) -> nn.Linear:
    """The last linear layer of a head: the one that gives the class scores."""
    linears = [m for m in head.modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ConfigError(f"the task head {type(head).__name__} has no linear output layer")
    return linears[-1]


def _resized(head: nn.Module, labels: int, std: float, seed: int) -> nn.Module:
    """A copy of `head` whose output layer gives `labels` scores, initialised from `seed` as
    transformers initialises heads (normal weights of std `initializer_range`, zero bias)."""
    fresh = copy.deepcopy(head)
    old = _output_layer(fresh)
    generator = torch.Generator().manual_seed(seed)
    weight = torch.empty(labels, old.in_features).normal_(0.0, std, generator=generator)
    new = nn.Linear(old.in_features, labels, bias=old.bias is not None)
    with torch.no_grad():
        new.weight.copy_(weight)
        if new.bias is not None:
            new.bias.zero_()
    new.to(device=old.weight.device, dtype=old.weight.dtype)
    if fresh is old:
        return new
    name = next(n for n, m in fresh.named_modules() if m is old)
    _replace(fresh, name, new)
    return fresh


def _replace(root: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, attribute = name.rpartition(".")
    setattr(get_module(root, parent) if parent else root, attribute, module)

"""Bottleneck adapter modules and the hooks that splice them into a frozen model."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from adaptlab.backbone import Backbone
from adaptlab.methods.handle import Switch
from adaptlab.methods.insertion import insert, inserted_parameters
from adaptlab.methods.results import ApplyContext, MethodResult

_ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "swish": nn.SiLU,
}


class Bottleneck(nn.Module):
    """f2(act(f1(h))): project d -> m, non-linearity, project m -> d.

    Near-identity initialisation (Houlsby et al. 2019 §3.6, paper-effectiveness §2.1): the
    down-projection is drawn from N(0, init_std^2) and the up-projection starts at zero, so an
    inserted adapter leaves the model's outputs exactly unchanged until it trains.
    """

    def __init__(
        self,
        hidden_size: int,
        bottleneck_size: int,
        activation: str,
        init_std: float,
        generator: torch.Generator,
        switch: Switch,
    ) -> None:
        super().__init__()
        self.down = nn.Linear(hidden_size, bottleneck_size)
        self.act = _ACTIVATIONS[activation]()
        self.up = nn.Linear(bottleneck_size, hidden_size)
        with torch.no_grad():
            self.down.weight.normal_(0.0, init_std, generator=generator)
            self.down.bias.zero_()
            self.up.weight.zero_()
            self.up.bias.zero_()
        self.switch = switch

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.up(self.act(self.down(hidden)))


class SequentialAdapter(Bottleneck):
    """Houlsby / Pfeiffer adapter on a sub-layer's output: h' = f2(act(f1(h))) + h (eq. 1)."""

    def hook(self, module: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> Any:
        if not self.switch.enabled:
            return None
        return output + self(output)


class ParallelAdapter(Bottleneck):
    """Parallel adapter beside the FFN: out + s * f2(act(f1(x))) with x the FFN's input.

    He et al. 2022 (Towards a Unified View of PETL, §3-4): the FFN input is captured by a
    pre-hook on the first FFN input projection and the branch is added to the FFN output.
    """

    def __init__(self, *args: Any, scale: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scale = scale
        self._ffn_input: torch.Tensor | None = None

    def capture(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        if self.switch.enabled:
            self._ffn_input = args[0]

    def hook(self, module: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> Any:
        if not self.switch.enabled:
            return None
        ffn_input, self._ffn_input = self._ffn_input, None
        if ffn_input is None:
            raise RuntimeError("parallel adapter: the FFN output ran without its FFN input")
        return output + self.scale * self(ffn_input)


def insert_sequential(
    model: nn.Module,
    backbone: Backbone,
    method: str,
    roles: tuple[str, ...],
    bottleneck_size: int,
    activation: str,
    init_std: float,
    ctx: ApplyContext,
) -> MethodResult:
    """One SequentialAdapter on the output of each `roles` layer of every block."""
    result = MethodResult(groups={method: set()})
    for target in (name for role in roles for name in backbone.modules_with_role(role)):
        adapter = SequentialAdapter(
            backbone.hidden_size,
            bottleneck_size,
            activation,
            init_std,
            ctx.generator(target),
            ctx.switch,
        )
        name, hook = insert(model, target, method, adapter)
        result.inserted[name] = adapter
        result.hooks.append(hook)
        result.groups[method] |= inserted_parameters(name, adapter)
    return result

"""Bottleneck adapter modules: the delta f2(act(f1(x))) a sequential or parallel adapter adds."""

from __future__ import annotations

import torch
from torch import nn

from adaptlab.backbone.parts import Backbone
from adaptlab.methods.results import ApplyContext, MethodResult
from adaptlab.methods.site import Insertion, SiteModule

_ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "swish": nn.SiLU,
}


class Bottleneck(SiteModule):
    """f2(act(f1(x))): project d -> m, non-linearity, project m -> d.

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

    def delta(self, x: torch.Tensor) -> torch.Tensor:
        return self.up(self.act(self.down(x)))


class ParallelAdapter(Bottleneck):
    """Parallel adapter beside the FFN: adds s * f2(act(f1(x))) with x the FFN's input.

    He et al. 2022 (Towards a Unified View of PETL, §3-4): it reads the input of the first FFN
    input projection and adds its branch to the FFN output.
    """

    def __init__(self, *args: object, scale: float, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.scale = scale

    def delta(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * super().delta(x)


def insert_sequential(
    backbone: Backbone,
    method: str,
    roles: tuple[str, ...],
    bottleneck_size: int,
    activation: str,
    init_std: float,
    ctx: ApplyContext,
) -> MethodResult:
    """A sequential bottleneck (h' = h + f2(act(f1(h))), eq. 1) on each `roles` layer's output."""
    ctx.check_bottleneck(method, bottleneck_size, backbone)
    result = MethodResult()
    for target in (name for role in roles for name in backbone.modules_with_role(role)):
        adapter = Bottleneck(
            backbone.hidden_size, bottleneck_size, activation, init_std, ctx.generator(target)
        )
        result.insertions.append(Insertion(target, adapter))
    return result

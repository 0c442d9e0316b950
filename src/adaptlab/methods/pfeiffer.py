"""Pfeiffer adapters: one bottleneck per block, after the FFN (slides-adapters; AdapterFusion).

Pfeiffer et al. 2021 keep only the FFN-side adapter, with ReLU and a reduction factor of 16
(bottleneck d / 16); the pretrained LayerNorms stay frozen.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from adaptlab.backbone import Backbone
from adaptlab.methods.bottleneck import insert_sequential
from adaptlab.methods.config import MethodConfig, check_activation, check_positive_int, require
from adaptlab.methods.params import norm_names, parameters_under
from adaptlab.methods.registry import Method, register
from adaptlab.methods.results import ApplyContext, MethodResult

SITES = ("ffn_out",)


@dataclass(frozen=True)
class PfeifferConfig(MethodConfig):
    """hidden_size: bottleneck m; when None it is hidden / reduction_factor."""

    name = "pfeiffer"
    hidden_size: int | None = None
    reduction_factor: int = 16
    activation: str = "relu"
    init_std: float = 1e-2
    train_norms: bool = False

    def __post_init__(self) -> None:
        if self.hidden_size is not None:
            check_positive_int("pfeiffer", "hidden_size", self.hidden_size)
        check_positive_int("pfeiffer", "reduction_factor", self.reduction_factor)
        check_activation("pfeiffer", self.activation)
        require(self.init_std >= 0, "pfeiffer", f"init_std must be >= 0, got {self.init_std!r}")

    def bottleneck_size(self, hidden: int) -> int:
        """The bottleneck m for a model of width `hidden`."""
        return self.hidden_size or max(1, hidden // self.reduction_factor)


def apply(
    model: nn.Module, backbone: Backbone, config: PfeifferConfig, ctx: ApplyContext
) -> MethodResult:
    size = config.bottleneck_size(backbone.hidden_size)
    result = insert_sequential(
        backbone, "pfeiffer", SITES, size, config.activation, config.init_std, ctx
    )
    if config.train_norms:
        result.groups["norms"] = norm_names(model) - parameters_under(model, backbone.head)
    return result


register(
    Method(
        "pfeiffer",
        PfeifferConfig,
        apply,
        "one bottleneck adapter per block, after the FFN",
        sites=lambda config: frozenset(SITES),
    )
)

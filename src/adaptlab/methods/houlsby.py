"""Houlsby adapters: two bottlenecks per block, after attention output and after the FFN.

paper-effectiveness §2.1, eq. 1: h' = f2(tanh(f1(h))) + h, inserted after each sub-layer's
output projection, before the residual add and LayerNorm. As in that paper the LayerNorms
and the classification layer train too; hidden size m in {64, 128, 256} (§3.2), lr 1e-4.
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

SITES = ("attention_out", "ffn_out")


@dataclass(frozen=True)
class HoulsbyConfig(MethodConfig):
    """hidden_size: bottleneck m; train_norms: LayerNorms train as in the paper."""

    name = "houlsby"
    hidden_size: int = 64
    activation: str = "tanh"
    init_std: float = 1e-2
    train_norms: bool = True

    def __post_init__(self) -> None:
        check_positive_int("houlsby", "hidden_size", self.hidden_size)
        check_activation("houlsby", self.activation)
        require(self.init_std >= 0, "houlsby", f"init_std must be >= 0, got {self.init_std!r}")


def apply(
    model: nn.Module, backbone: Backbone, config: HoulsbyConfig, ctx: ApplyContext
) -> MethodResult:
    result = insert_sequential(
        backbone, "houlsby", SITES, config.hidden_size, config.activation, config.init_std, ctx
    )
    if config.train_norms:
        result.groups["norms"] = norm_names(model) - parameters_under(model, backbone.head)
    return result


register(
    Method(
        "houlsby",
        HoulsbyConfig,
        apply,
        "two bottleneck adapters per block (after attention and FFN) + LayerNorms",
        sites=lambda config: frozenset(SITES),
    )
)

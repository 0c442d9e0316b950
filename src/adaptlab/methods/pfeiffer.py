"""Pfeiffer adapters: one bottleneck per block, after the FFN (slides-adapters; AdapterFusion).

Pfeiffer et al. 2021 keep only the FFN-side adapter, with ReLU and a reduction factor of 16
(bottleneck d / 16); the pretrained LayerNorms stay frozen. `invertible=True` adds MAD-X's
invertible adapter on the embeddings (`adaptlab.methods.invertible`), for language adapters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import nn

from adaptlab.backbone import Backbone
from adaptlab.methods.bottleneck import insert_sequential
from adaptlab.methods.config import (
    ADDED,
    MethodConfig,
    check_activation,
    check_positive_int,
    require,
)
from adaptlab.methods.invertible import SITES as INVERTIBLE_SITES
from adaptlab.methods.invertible import invertible_insertions
from adaptlab.methods.params import norm_names, parameters_under
from adaptlab.methods.registry import Method, register
from adaptlab.methods.results import ApplyContext, MethodResult

SITES = ("ffn_out",)


@dataclass(frozen=True)
class PfeifferConfig(MethodConfig):
    """hidden_size: bottleneck m; when None it is hidden / reduction_factor. invertible: an
    invertible adapter on the embeddings too, its F and G reducing half the embedding width by
    invertible_reduction_factor (MAD-X §2.2)."""

    name = "pfeiffer"
    hidden_size: int | None = None
    reduction_factor: int = 16
    activation: str = "relu"
    init_std: float = 1e-2
    train_norms: bool = False
    invertible: bool = field(default=False, metadata=ADDED)
    invertible_reduction_factor: int = field(default=2, metadata=ADDED)

    def __post_init__(self) -> None:
        if self.hidden_size is not None:
            check_positive_int("pfeiffer", "hidden_size", self.hidden_size)
        check_positive_int("pfeiffer", "reduction_factor", self.reduction_factor)
        check_activation("pfeiffer", self.activation)
        require(
            isinstance(self.invertible, bool),
            "pfeiffer",
            f"invertible must be true or false, got {self.invertible!r}",
        )
        check_positive_int(
            "pfeiffer", "invertible_reduction_factor", self.invertible_reduction_factor
        )
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
    if config.invertible:
        result.insertions += invertible_insertions(
            model, backbone, "pfeiffer", config.invertible_reduction_factor, config.init_std, ctx
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
        sites=lambda config: frozenset(SITES + (INVERTIBLE_SITES if config.invertible else ())),
    )
)

"""Pfeiffer adapters' options (Pfeiffer et al. 2021: ReLU, reduction factor 16, LayerNorms
frozen; MAD-X's invertible adapter on request); the method is `adaptlab.methods.pfeiffer`."""

from __future__ import annotations

from dataclasses import dataclass, field

from adaptlab.methods.config import (
    ADDED,
    MethodConfig,
    check_activation,
    check_positive_int,
    require,
)
from adaptlab.methods.registry import Method, register

SITES = ("ffn_out",)
INVERTIBLE_SITES = ("embeddings", "output_embeddings")
"""What an invertible adapter modifies (`adaptlab.methods.invertible`)."""


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


register(
    Method(
        "pfeiffer",
        PfeifferConfig,
        "one bottleneck adapter per block, after the FFN",
        "adaptlab.methods.pfeiffer",
        sites=lambda config: frozenset(SITES + (INVERTIBLE_SITES if config.invertible else ())),
    )
)

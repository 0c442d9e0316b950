"""The MAM adapter: prefix tuning at attention and a scaled parallel adapter at the FFN.

He et al. 2022 ("Towards a Unified View of Parameter-Efficient Transfer Learning", §4.5): of
the design elements they compare, modifying the FFN with a parallel adapter scaled by s = 4
uses a parameter budget best, and a small prefix at attention (l = 30) adds what the FFN
alone misses; MAM ("Mix-And-Match") is that combination, with r = 512 for the FFN side. Here
it is one named method with those defaults: the prefix part is `prefix` (reparameterised while
training, folded away when saved) and the FFN part is `parallel`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from torch import nn

from adaptlab.backbone import Backbone
from adaptlab.methods.config import MethodConfig, check_activation, check_positive_int, require
from adaptlab.methods.parallel import ParallelConfig, insert_parallel
from adaptlab.methods.prefix import PrefixConfig, check_prefix, insert_prefixes
from adaptlab.methods.registry import Method, register
from adaptlab.methods.results import ApplyContext, MethodResult

SITES = ("attention_prefix", "ffn_out")


@dataclass(frozen=True)
class MAMConfig(MethodConfig):
    """prefix_length l at attention; hidden_size r and scale s of the FFN's parallel adapter."""

    name = "mam"
    prefix_length: int = 30
    hidden_size: int = 512
    scale: float = 4.0
    activation: str = "relu"
    init_std: float = 1e-2
    reparameterize: bool = True
    reparam_hidden: int = 512

    def __post_init__(self) -> None:
        check_prefix(
            "mam", "prefix_length", self.prefix_length, "reparam_hidden", self.reparam_hidden
        )
        check_positive_int("mam", "hidden_size", self.hidden_size)
        check_activation("mam", self.activation)
        require(self.scale > 0, "mam", f"scale must be > 0, got {self.scale!r}")
        require(self.init_std >= 0, "mam", f"init_std must be >= 0, got {self.init_std!r}")

    def folded(self) -> MAMConfig:
        return replace(self, reparameterize=False)

    def parts(self) -> tuple[PrefixConfig, ParallelConfig]:
        """The prefix and parallel-adapter configs it is made of."""
        prefix = PrefixConfig(
            length=self.prefix_length,
            reparameterize=self.reparameterize,
            reparam_hidden=self.reparam_hidden,
        )
        parallel = ParallelConfig(
            hidden_size=self.hidden_size,
            scale=self.scale,
            activation=self.activation,
            init_std=self.init_std,
        )
        return prefix, parallel


def apply(
    model: nn.Module, backbone: Backbone, config: MAMConfig, ctx: ApplyContext
) -> MethodResult:
    prefix, parallel = config.parts()
    result = insert_parallel(backbone, parallel, ctx, "mam")
    result.insertions[:0] = insert_prefixes(model, backbone, prefix, ctx, "mam")
    return result


register(
    Method(
        "mam",
        MAMConfig,
        apply,
        "MAM adapter: prefix at attention + scaled parallel adapter at the FFN (+ head)",
        sites=lambda config: frozenset(SITES),
    )
)

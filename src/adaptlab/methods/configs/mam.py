"""The MAM adapter's options (He et al. 2022, §4.5: a prefix of l = 30 at attention, a parallel
adapter of r = 512 scaled by s = 4 at the FFN); the method is `adaptlab.methods.mam`."""

from __future__ import annotations

from dataclasses import dataclass, replace

from adaptlab.methods.config import MethodConfig, check_activation, check_positive_int, require
from adaptlab.methods.configs.parallel import ParallelConfig
from adaptlab.methods.configs.prefix import PrefixConfig, check_prefix
from adaptlab.methods.registry import Method, register

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


register(
    Method(
        "mam",
        MAMConfig,
        "MAM adapter: prefix at attention + scaled parallel adapter at the FFN (+ head)",
        "adaptlab.methods.mam",
        sites=lambda config: frozenset(SITES),
    )
)

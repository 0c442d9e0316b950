"""Full fine-tuning's options: mixout (Lee et al. 2020), off by default; lr 2e-5. The method
is `adaptlab.methods.full`."""

from __future__ import annotations

from dataclasses import dataclass, field

from adaptlab.methods.config import ADDED, FINE_TUNING_LR, MethodConfig, require
from adaptlab.methods.registry import Method, register


@dataclass(frozen=True)
class FullConfig(MethodConfig):
    """mixout: the probability p that a unit falls back to its pretrained weights (0: off;
    He et al. 2021 compare p = 0.9). lr 2e-5 (paper-effectiveness §3)."""

    name = "full"
    default_learning_rate = FINE_TUNING_LR
    mixout: float = field(default=0.0, metadata=ADDED)

    def __post_init__(self) -> None:
        ok = isinstance(self.mixout, int | float) and not isinstance(self.mixout, bool)
        require(
            ok and 0 <= self.mixout < 1, "full", f"mixout must be in [0, 1), got {self.mixout!r}"
        )


register(
    Method(
        "full",
        FullConfig,
        "all parameters train; mixout: p of mixout (Lee et al. 2020), replacing dropout",
        "adaptlab.methods.full",
        exclusive=True,
        trains_base_weights=True,
    )
)

"""Training hyper-parameters, validated, with the papers' defaults."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

import adaptlab.checks as checks
from adaptlab.errors import ConfigError
from adaptlab.records.jsonfields import JsonObject

if TYPE_CHECKING:
    from adaptlab.methods.config import MethodConfig


@dataclass(frozen=True)
class TrainConfig:
    """The protocol of paper-effectiveness §3 / App. A.2: AdamW, linear schedule, batch 16.

    learning_rate None means the method's default (2e-5 for methods that update pretrained
    weights, 1e-4 for adapters and other few-parameter methods; for tasks that generate text,
    each method's `generation_learning_rate`).
    """

    epochs: int = 10
    batch_size: int = 16
    learning_rate: float | None = None
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    max_length: int = 128
    eval_batch_size: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "eval_batch_size"):
            checks.positive(getattr(self, name), name.replace("_", "-"))
        checks.at_least(self.max_length, 2, "max-length")
        checks.seed(self.seed)
        if self.learning_rate is not None and not 0 < self.learning_rate < 1:
            raise ConfigError(f"learning-rate must be in (0, 1), got {self.learning_rate!r}")
        if not 0 <= self.warmup_ratio < 1:
            raise ConfigError(f"warmup-ratio must be in [0, 1), got {self.warmup_ratio!r}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ConfigError(f"weight-decay must be >= 0, got {self.weight_decay!r}")
        if not (math.isfinite(self.max_grad_norm) and self.max_grad_norm > 0):
            raise ConfigError(f"max-grad-norm must be > 0, got {self.max_grad_norm!r}")

    def learning_rate_for(self, configs: Iterable[MethodConfig], *, generates: bool) -> float:
        """The given learning rate, or the lowest default of the method `configs` a run trains
        (App. A.2), for a task that generates text (`generates`) or one that does not."""
        if self.learning_rate is not None:
            return self.learning_rate
        return min(config.learning_rate_default(generates) for config in configs)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, train: JsonObject) -> TrainConfig:
        """The config `to_dict` wrote, each field read as its annotated type."""
        train.refuse_unknown([f.name for f in fields(cls)])
        readers: dict[str, Callable[[str], Any]] = {
            "int": train.integer,
            "float": train.number,
            "float | None": train.optional_number,
        }
        settings: dict[str, Any] = {
            f.name: readers[str(f.type)](f.name) for f in fields(cls) if f.name in train
        }
        return cls(**settings)

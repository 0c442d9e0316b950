"""What defines a sequence: one model, ordered stages (data entries), a method, a strategy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.methods.compose import MethodSpec, check_combination, resolve
from adaptlab.methods.config import MethodConfig
from adaptlab.train.config import TrainConfig
from adaptlab.train.continual.strategy import StrategyConfig, strategy_config


@dataclass(frozen=True)
class SequenceSpec:
    """A model trained through `stages` in order with `methods` and `strategy`.

    `train_size` samples that many training examples per stage (and as many dev examples, as
    `adaptlab train` does); `test_size` caps each stage's test set (a stratified, seeded
    sample), since every stage is tested after every stage. With `single_stage`, each stage
    after the first is also trained alone, for forward transfer.
    """

    model: str
    stages: tuple[str, ...]
    methods: tuple[MethodConfig, ...]
    strategy: StrategyConfig
    train_size: int | None = None
    test_size: int | None = None
    train: TrainConfig = field(default_factory=TrainConfig)
    device: str = "cpu"
    single_stage: bool = False

    def __post_init__(self) -> None:
        if not self.stages or not all(isinstance(s, str) and s for s in self.stages):
            raise ConfigError("a sequence needs at least one stage (a data set name or file)")
        check_combination(self.methods)
        if self.methods[0].name == "fusion":
            raise ConfigError("a sequence trains adapters; fusion is not one of its methods")
        for name in ("train_size", "test_size"):
            size = getattr(self, name)
            if size is not None and (
                isinstance(size, bool) or not isinstance(size, int) or size < 1
            ):
                raise ConfigError(
                    f"{name.replace('_', '-')} must be a positive integer, got {size!r}"
                )

    @classmethod
    def build(
        cls,
        model: str,
        stages: Sequence[str],
        method: MethodSpec | Sequence[MethodSpec] = "houlsby",
        strategy: str = "sequential",
        strategy_options: Mapping[str, Any] | None = None,
        **settings: Any,
    ) -> SequenceSpec:
        """A spec from names as users write them (`"lora"`, `"replay"`, {"rate": 0.05})."""
        config = strategy_config(strategy, strategy_options)
        return cls(model, tuple(stages), resolve(method, {}), config, **settings)

    def learning_rate(self) -> float:
        """The given learning rate, or the lowest default of the methods (as `RunSpec`)."""
        if self.train.learning_rate is not None:
            return self.train.learning_rate
        return min(c.default_learning_rate for c in self.methods)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, the learning rate resolved."""
        return {
            "model": self.model,
            "stages": list(self.stages),
            "methods": [{"name": c.name, "config": c.to_dict()} for c in self.methods],
            "strategy": {"name": self.strategy.name, "config": self.strategy.to_dict()},
            "train_size": self.train_size,
            "test_size": self.test_size,
            "train": {**self.train.to_dict(), "learning_rate": self.learning_rate()},
            "device": self.device,
            "single_stage": self.single_stage,
        }

"""What defines one training run: model, data, validated method configs and training settings.

A run's id (`adaptlab.study.planner.run_id`) hashes `RunSpec.to_dict()`, so that dict is a
stored contract: the seven fields below always write exactly what they wrote in adaptlab 0.1.0,
and a field added later writes itself only when it differs from its default. Adding a field
with a default therefore keeps the id of every existing run, and a results store keeps
resuming.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.methods.compose import MethodSpec, check_combination, resolve
from adaptlab.methods.config import MethodConfig
from adaptlab.methods.registry import make_config
from adaptlab.train.config import TrainConfig
from adaptlab.train.jsonfields import JsonObject

_CORE = ("model", "data", "methods", "train_size", "train", "data_options", "device")
"""The fields every spec writes, in this order (adaptlab 0.1.0's form)."""


@dataclass(frozen=True)
class RunSpec:
    """Everything that defines a run. `methods` are validated configs: `RunSpec.build` takes a
    method as users write it (`"houlsby"`, `"lora+bitfit"`, `{"lora": {"rank": 4}}`, a list)."""

    model: str
    data: str
    methods: tuple[MethodConfig, ...]
    train_size: int | None = None
    train: TrainConfig = field(default_factory=TrainConfig)
    data_options: Mapping[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    fuse: tuple[str, ...] = ()
    """Adapter (or run) folders that a fusion run fuses; its method is `fusion`."""
    stack: tuple[str, ...] = ()
    """Adapter (or run) folders that run, frozen, below the adapter this run trains."""

    def __post_init__(self) -> None:
        if not isinstance(self.methods, tuple) or not all(
            isinstance(config, MethodConfig) for config in self.methods
        ):
            raise ConfigError(
                f"RunSpec.methods must be a tuple of method configs, got {self.methods!r}; "
                "RunSpec.build takes method names such as 'lora+bitfit'"
            )
        check_combination(self.methods)
        for name in ("fuse", "stack"):
            folders = getattr(self, name)
            if not isinstance(folders, tuple) or not all(isinstance(f, str) and f for f in folders):
                raise ConfigError(f"RunSpec.{name} must be a tuple of folders, got {folders!r}")
        fusion = self.methods[0].name == "fusion"
        if fusion and not self.fuse:
            raise ConfigError("a fusion run needs the adapters to fuse (--adapters RUN,RUN,...)")
        if self.fuse and not fusion:
            raise ConfigError("adapters to fuse (--adapters) need --method fusion")
        if fusion and self.stack:
            raise ConfigError("a fusion run trains over the adapters it fuses; drop --stack")
        size = self.train_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ConfigError(f"train-size must be a positive integer, got {size!r}")

    @classmethod
    def build(
        cls,
        model: str,
        data: str,
        method: MethodSpec | Sequence[MethodSpec] = "houlsby",
        **settings: Any,
    ) -> RunSpec:
        """A spec whose method is given as users write it; `settings` are the other fields."""
        return cls(model, data, resolve(method, {}), **settings)

    def learning_rate(self) -> float:
        """The given learning rate, or the lowest default of the run's methods (App. A.2)."""
        if self.train.learning_rate is not None:
            return self.train.learning_rate
        return min(c.default_learning_rate for c in self.methods)

    def to_dict(self) -> dict[str, Any]:
        """The fully resolved spec, JSON-ready (the learning rate resolved too)."""
        spec: dict[str, Any] = {
            "model": self.model,
            "data": self.data,
            "methods": [{"name": c.name, "config": c.to_dict()} for c in self.methods],
            "train_size": self.train_size,
            "train": {**self.train.to_dict(), "learning_rate": self.learning_rate()},
            "data_options": dict(self.data_options),
            "device": self.device,
        }
        for added in fields(self):
            value = getattr(self, added.name)
            if added.name not in _CORE and value != _default(added):
                spec[added.name] = _plain(value)
        return spec

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "run spec") -> RunSpec:
        """The spec `to_dict` wrote (a store row, metrics.json), validated again.

        Raises ConfigError naming the field that is missing or of the wrong type.
        """
        return cls.from_json(JsonObject(data, where))

    @classmethod
    def from_json(cls, spec: JsonObject) -> RunSpec:
        """`from_dict` of an object being read as part of a larger record."""
        spec.refuse_unknown((*_CORE, "fuse", "stack"))
        parts = [(item.text("name"), item.mapping("config")) for item in spec.objects("methods")]
        try:
            methods = tuple(make_config(name, options) for name, options in parts)
        except ConfigError as error:
            raise ConfigError(f"{spec.where}: {spec.prefix}methods: {error}") from None
        return cls(
            model=spec.text("model"),
            data=spec.text("data"),
            methods=methods,
            train_size=spec.optional_integer("train_size"),
            train=_train_config(spec.object("train")),
            data_options=dict(spec.mapping("data_options", default={})),
            device=spec.text("device", default="cpu"),
            fuse=spec.texts("fuse", default=()),
            stack=spec.texts("stack", default=()),
        )


def _train_config(train: JsonObject) -> TrainConfig:
    """TrainConfig from its stored form, each field read as its annotated type."""
    names = [f.name for f in fields(TrainConfig)]
    train.refuse_unknown(names)
    readers = {"int": train.integer, "float": train.number, "float | None": train.optional_number}
    settings: dict[str, Any] = {
        f.name: readers[str(f.type)](f.name) for f in fields(TrainConfig) if f.name in train
    }
    return TrainConfig(**settings)


def _default(spec_field: Field[Any]) -> Any:
    if spec_field.default is not MISSING:
        return spec_field.default
    if spec_field.default_factory is not MISSING:
        return spec_field.default_factory()
    return MISSING


def _plain(value: Any) -> Any:
    """A field's value as JSON: `to_dict()` of records, lists for tuples."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    return value

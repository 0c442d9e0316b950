"""What a run's spec and a sequence's spec share (`RunSpec`, `SequenceSpec`): the model, the
methods they train and how (train size, `TrainConfig`, device, scale), checked, stored and read
back the same way."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.methods.config import MethodConfig
from adaptlab.methods.registry import check_base_stays_frozen
from adaptlab.records.config import TrainConfig
from adaptlab.records.jsonfields import JsonObject
from adaptlab.records.scale import Scale


def check_training_fields(
    configs: Sequence[MethodConfig], scale: Scale, **sizes: int | None
) -> None:
    """What a spec checks of the fields it shares: each of `sizes` (`train_size=...`) None or a
    positive integer, and a frozen base (`scale`) left frozen by the method `configs`."""
    for name, size in sizes.items():
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ConfigError(f"{name.replace('_', '-')} must be a positive integer, got {size!r}")
    if scale.frozen_base is not None:
        check_base_stays_frozen(configs, scale.frozen_base)


def method_records(configs: Iterable[MethodConfig]) -> list[dict[str, Any]]:
    """The method configs as a spec stores them: each one's name and options."""
    return [{"name": config.name, "config": config.to_dict()} for config in configs]


def read_method_records(spec: JsonObject) -> list[tuple[str, Mapping[str, Any]]]:
    """Each method a stored spec names, as (name, options), the options not yet checked."""
    return [(item.text("name"), item.mapping("config")) for item in spec.objects("methods")]


def read_shared_fields(spec: JsonObject) -> dict[str, Any]:
    """`model`, `train_size`, `train`, `device` and `scale` of a stored spec, as the spec's
    keywords (no device stored: the CPU; no scale: the float32 default)."""
    return {
        "model": spec.text("model"),
        "train_size": spec.optional_integer("train_size"),
        "train": TrainConfig.from_json(spec.object("train")),
        "device": spec.text("device", default="cpu"),
        "scale": Scale.from_json(spec.object("scale")) if "scale" in spec else Scale(),
    }

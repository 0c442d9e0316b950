"""Turn method specs into validated configs and refuse combinations that conflict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.methods.config import MethodConfig
from adaptlab.methods.registry import get_method, make_config

MethodSpec = str | MethodConfig | Mapping[str, Mapping[str, Any] | None]
"""A method name ("houlsby", "lora+bitfit"), a config object, or {name: options}."""


def resolve(
    spec: MethodSpec | Sequence[MethodSpec], options: Mapping[str, Any]
) -> tuple[MethodConfig, ...]:
    """Configs for `spec`; keyword `options` go to the one method named, if only one is."""
    configs = tuple(_expand(spec))
    if options:
        if len(configs) != 1:
            raise ConfigError(
                "options given as keywords need exactly one method; "
                "pass config objects or {name: options} for a combination"
            )
        configs = (make_config(configs[0].name, {**configs[0].to_dict(), **options}),)
    check_combination(configs)
    return configs


def _expand(spec: MethodSpec | Sequence[MethodSpec]) -> list[MethodConfig]:
    if isinstance(spec, MethodConfig):
        return [spec]
    if isinstance(spec, str):
        names = [part.strip() for part in spec.split("+")]
        if not all(names):
            raise ConfigError(f"bad method spec {spec!r}: expected names joined by '+'")
        return [make_config(name) for name in names]
    if isinstance(spec, Mapping):
        return [make_config(name, opts or {}) for name, opts in spec.items()]
    return [config for item in spec for config in _expand(item)]


def check_combination(configs: Sequence[MethodConfig]) -> None:
    """One line naming the clash: a repeated method, an exclusive one, or a shared site."""
    if not configs:
        raise ConfigError("no adaptation method given")
    names = [c.name for c in configs]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"method {name!r} is given twice")
    if len(configs) > 1:
        for name in names:
            if get_method(name).exclusive:
                raise ConfigError(
                    f"{name!r} cannot be combined with other methods ({'+'.join(names)})"
                )
    claimed: dict[str, str] = {}
    for config in configs:
        for site in get_method(config.name).sites(config):
            if site in claimed:
                raise ConfigError(
                    f"{claimed[site]!r} and {config.name!r} both modify the {site} layers; "
                    "choose one of them"
                )
            claimed[site] = config.name

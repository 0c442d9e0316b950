"""Turn method specs into validated configs and refuse combinations that conflict; tell the
fusion (`fusion`, which users write where they write a method) from methods."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.methods.config import MethodConfig
from adaptlab.methods.configs.fusion import FUSION, FusionConfig, fusion_config
from adaptlab.methods.registry import get_method, make_config

MethodSpec = str | MethodConfig | Mapping[str, Mapping[str, Any] | None]
"""A method name ("houlsby", "lora+bitfit"), a config object, or {name: options}."""


def resolve(
    spec: MethodSpec | Sequence[MethodSpec],
    options: Mapping[str, Any],
    *,
    generates: bool = False,
) -> tuple[MethodConfig, ...]:
    """Configs for `spec`; keyword `options` go to the one method named, if only one is. A
    method given by name (or name and options) for a task that generates text (`generates`)
    takes the method's generation defaults; a config object is kept as it is."""
    configs = tuple(_expand(spec, generates))
    if options:
        if len(configs) != 1:
            raise ConfigError(
                "options given as keywords need exactly one method; "
                "pass config objects or {name: options} for a combination"
            )
        configs = (make_config(configs[0].name, {**configs[0].to_dict(), **options}),)
    check_combination(configs)
    return configs


def fusion_in(spec: MethodSpec | Sequence[MethodSpec]) -> FusionConfig | None:
    """The fusion's config when `spec` is `fusion` alone, as users write it (`"fusion"`,
    `{"fusion": options}`, a FusionConfig, or a list of one of these); else None."""
    if isinstance(spec, FusionConfig):
        return spec
    if isinstance(spec, str):
        return fusion_config() if spec.strip() == FUSION else None
    if isinstance(spec, Mapping):
        return fusion_config(spec[FUSION]) if list(spec) == [FUSION] else None
    if isinstance(spec, MethodConfig) or len(spec) != 1:
        return None
    return fusion_in(spec[0])


def _expand(spec: MethodSpec | Sequence[MethodSpec], generates: bool) -> list[MethodConfig]:
    if isinstance(spec, MethodConfig):
        return [spec]
    if isinstance(spec, str):
        names = [part.strip() for part in spec.split("+")]
        if not all(names):
            raise ConfigError(f"bad method spec {spec!r}: expected names joined by '+'")
        return [make_config(name, generates=generates) for name in names]
    if isinstance(spec, Mapping):
        return [make_config(name, opts or {}, generates=generates) for name, opts in spec.items()]
    return [config for item in spec for config in _expand(item, generates)]


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

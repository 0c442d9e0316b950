"""The method registry: every method registers its name, config class, what it supports and
the module of its `apply` once, in the module of its config.

Registering beside the config (which needs no torch) lets records, listings and help text
read a method without loading the code that inserts it; that code is imported the first
time the method is applied.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adaptlab.errors import ConfigError
from adaptlab.methods.config import MethodConfig, build_config
from adaptlab.methods.configs.fusion import FUSION, FUSION_ENTRY, NOT_A_METHOD, FusionEntry
from adaptlab.models.quantize import BITS
from adaptlab.registry import Registry

if TYPE_CHECKING:  # the registry itself loads no torch: records read method configs by name
    from torch import nn

    from adaptlab.backbone.parts import Backbone
    from adaptlab.methods.results import ApplyContext, MethodResult


def _no_sites(config: Any) -> frozenset[str]:
    """The sites of a method that modifies no role (it trains pretrained weights)."""
    return frozenset()


@dataclass(frozen=True)
class Method:
    """A registered adaptation method: its options, what it supports, where its code is."""

    name: str
    config_class: type[MethodConfig]
    description: str
    apply_module: str
    """The module whose `apply(model, backbone, config, ctx) -> MethodResult` inserts the
    method; imported on the first `apply` (it needs torch)."""
    sites: Callable[[Any], frozenset[str]] = _no_sites
    """Roles where the method inserts or hooks modules; two methods may not share one."""
    exclusive: bool = False
    """True for methods that cannot be combined with any other (full, head, lst)."""
    mergeable: bool = False
    """True for methods `adaptlab.merge` folds into the weights (lora, ia3)."""
    trains_base_weights: bool = False
    """True for methods whose trained parameters are the base model's own weights (full,
    freeze, bitfit, lnfit): a quantised base, which stays frozen, refuses them. Norms a method
    trains beside the modules it inserts (houlsby's) and the task head keep their precision
    on a quantised base and do not count."""

    def apply(
        self, model: nn.Module, backbone: Backbone, config: Any, ctx: ApplyContext
    ) -> MethodResult:
        """Insert the method into `model` (or mark the parameters it trains)."""
        code = importlib.import_module(self.apply_module)
        return code.apply(model, backbone, config, ctx)  # type: ignore[no-any-return]

    def supports(self) -> str:
        """What the method goes with, in words: 'alone' or 'combines', 'merges', and
        'full-precision base' for one that trains the base's weights."""
        words = ["alone" if self.exclusive else "combines"]
        if self.mergeable:
            words.append("merges")
        if self.trains_base_weights:
            words.append("full-precision base")
        return ", ".join(words)


BUILTIN_METHODS = (
    "full",
    "head",
    "freeze",
    "bitfit",
    "lnfit",
    "houlsby",
    "pfeiffer",
    "parallel",
    "lora",
    "ia3",
    "prefix",
    "mam",
    "lst",
    FUSION,
)
"""What `--method` takes out of the box, in the order listings show it: adaptlab's methods,
each registered by its config module `adaptlab.methods.configs.<name>` (imported when the
method is first looked up), then fusion, which is no method but trains over adapters."""

METHODS: Registry[Method] = Registry(
    "method",
    builtin={
        name: f"adaptlab.methods.configs.{name}" for name in BUILTIN_METHODS if name != FUSION
    },
)


def register(method: Method) -> Method:
    """Add `method` to the registry under its name."""
    return METHODS.register(method)


def list_methods() -> list[Method | FusionEntry]:
    """What `--method` takes: every method (adaptlab's own in listing order, then any
    registered from outside), then fusion, which trains over adapters."""
    return [*METHODS, FUSION_ENTRY]


def get_method(name: str) -> Method:
    """The method registered as `name`, or a one-line error listing the known ones (and, for
    `fusion`, saying how a fusion is trained instead)."""
    if name == FUSION:
        raise ConfigError(NOT_A_METHOD)
    return METHODS.get(name)


def check_base_stays_frozen(configs: Sequence[MethodConfig], kind: str) -> None:
    """One line naming the first method of `configs` that trains the base model's weights,
    which a base quantised to `kind` (nf4, int8) or kept in half precision (bf16, fp16) keeps
    frozen; fusion trains over adapters."""
    for config in configs:
        if config.name != FUSION and get_method(config.name).trains_base_weights:
            frozen = METHODS.names(lambda method: not method.trains_base_weights)
            raise ConfigError(
                f"{config.name} trains the base model's weights, which a {BITS.get(kind, kind)} "
                f"base keeps frozen; use the full-precision base, or one of {', '.join(frozen)}"
            )


def make_config(
    name: str, options: Mapping[str, Any] | None = None, *, generates: bool = False
) -> MethodConfig:
    """Build and validate method `name`'s config from plain options (see `build_config`), for
    a task that generates text (`generates`: the method's generation defaults fill in what the
    options leave out) or one that does not."""
    config_class = get_method(name).config_class
    if generates:
        options = config_class.generation_defaults(options or {})
    return build_config(config_class, options)

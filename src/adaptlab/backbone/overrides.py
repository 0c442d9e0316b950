"""User-supplied module names for models whose layout discovery cannot read on its own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from adaptlab.errors import ConfigError


@dataclass(frozen=True)
class BackboneOverrides:
    """Dotted module names: `blocks` from the model root, the roles relative to each block."""

    blocks: str | None = None
    query: str | None = None
    key: str | None = None
    value: str | None = None
    attention_out: str | None = None
    ffn_in: tuple[str, ...] | None = None
    ffn_out: str | None = None

    @classmethod
    def parse(cls, value: BackboneOverrides | Mapping[str, Any] | None) -> BackboneOverrides:
        """Accept an overrides object, a plain mapping (from JSON/YAML/CLI), or None."""
        if value is None:
            return cls()
        if isinstance(value, BackboneOverrides):
            return value
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ConfigError(
                f"unknown backbone override {unknown[0]!r}; known: {', '.join(sorted(known))}"
            )
        options = dict(value)
        if isinstance(options.get("ffn_in"), str):
            options["ffn_in"] = (options["ffn_in"],)
        elif options.get("ffn_in") is not None:
            options["ffn_in"] = tuple(options["ffn_in"])
        return cls(**options)

    def to_dict(self) -> dict[str, Any]:
        """The overrides that are set, JSON-ready."""
        return {
            k: list(v) if isinstance(v, tuple) else v
            for k, v in asdict(self).items()
            if v is not None
        }

"""A spec's validation error as one line naming the file, the line and the key, so a user
finds what to fix without reading a pydantic report."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ValidationError

from adaptlab.study.yamlfile import YamlDocument


def describe_error(
    document: YamlDocument,
    error: ValidationError,
    model: type[BaseModel],
    sections: Mapping[str, type[BaseModel]],
) -> str:
    """The first validation error as `FILE line N, KEY: message (and k more)`.

    An unknown key lists the known ones: `model`'s at the top level, else those of the model
    `sections` gives for the top-level key it sits under (none where it gives none)."""
    errors = error.errors()
    first = errors[0]
    loc = first["loc"]
    line, key = document.locate(loc)
    kind = first["type"]
    if kind == "missing":
        message = f"required key {loc[-1]!r} is missing"
    elif kind == "extra_forbidden":
        owner = model if len(loc) == 1 else sections.get(str(loc[0]))
        known = f"; known keys: {', '.join(owner.model_fields)}" if owner else ""
        message = f"unknown key {loc[-1]!r}{known}"
    elif kind == "value_error":
        message = str(first["ctx"]["error"])
    else:
        message = f"{first['msg'][0].lower()}{first['msg'][1:]}, got {first['input']!r}"
    where = f"{document.path} line {line}" + (f", {key}" if key else "")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {message}{more}"

"""A spec's validation error as one line naming the file, the line and the key, so a user
finds what to fix without reading a pydantic report."""

from __future__ import annotations

import typing
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

    An unknown key lists the known ones: those of the model it sits in (`_owner`)."""
    errors = error.errors()
    first = errors[0]
    loc = first["loc"]
    line, key = document.locate(loc)
    kind = first["type"]
    if kind == "missing":
        message = f"required key {loc[-1]!r} is missing"
    elif kind == "extra_forbidden":
        owner = _owner(loc, model, sections)
        known = f"; known keys: {', '.join(owner.model_fields)}" if owner else ""
        message = f"unknown key {loc[-1]!r}{known}"
    elif kind == "value_error":
        message = str(first["ctx"]["error"])
    else:
        message = f"{first['msg'][0].lower()}{first['msg'][1:]}, got {first['input']!r}"
    where = f"{document.path} line {line}" + (f", {key}" if key else "")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {message}{more}"


def _owner(
    loc: tuple[int | str, ...], model: type[BaseModel], sections: Mapping[str, type[BaseModel]]
) -> type[BaseModel] | None:
    """The model whose keys the last key of `loc` sits among: `model` at the top level, else
    the one `sections` gives for the top-level key (None where it gives none), then down each
    nested model's field on the way (`methods[1].combine`: the combine options')."""
    if len(loc) == 1:
        return model
    owner = sections.get(str(loc[0]))
    for key in loc[1:-1]:
        if owner is not None and isinstance(key, str) and key in owner.model_fields:
            owner = _model_in(owner.model_fields[key].annotation)
    return owner


def _model_in(annotation: object) -> type[BaseModel] | None:
    """The pydantic model a field's annotation holds (`Options | None`, `list[Options]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next(filter(None, map(_model_in, typing.get_args(annotation))), None)

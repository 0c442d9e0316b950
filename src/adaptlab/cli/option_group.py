"""Several options declared once and taken by a command as one parameter.

typer reads a command's options from its signature, so `with_option_group` gives the command a
signature with the group's options in place of its one group parameter, and calls it with
the group built from them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

Command = Callable[..., None]


def with_option_group(
    parameter: str, build: Callable[..., object], options: Mapping[str, tuple[Any, Any]]
) -> Callable[[Command], Command]:
    """Replace the command's `parameter` by `options` (name -> (annotation, default)); the
    command receives `build(**their values)` as `parameter`."""
    declared = [
        inspect.Parameter(
            name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation
        )
        for name, (annotation, default) in options.items()
    ]

    def decorate(command: Command) -> Command:
        signature = inspect.signature(command, eval_str=True)
        if parameter not in signature.parameters:
            raise TypeError(f"{command.__name__} has no {parameter} parameter")
        parameters: list[inspect.Parameter] = []
        for each in signature.parameters.values():
            parameters.extend(declared if each.name == parameter else [each])

        @functools.wraps(command)
        def run(**values: Any) -> None:
            group = build(**{name: values.pop(name) for name in options})
            command(**values, **{parameter: group})

        run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        return run

    return decorate


def given_fields(group: Any) -> dict[str, Any]:
    """A dataclass group's fields that were given (neither None nor False), by name: the data
    options of a group whose every option defaults to not given."""
    values = {each.name: getattr(group, each.name) for each in fields(group)}
    return {
        name: value for name, value in values.items() if value is not None and value is not False
    }

"""Several options declared once and taken by a command as one parameter.

typer reads a command's options from its signature, so `with_option_group` gives the command a
signature with the group's options in place of its one group parameter, and calls it with
the group built from them. A dataclass group declares its options as its fields, each typed
`Annotated[<type>, typer.Option(...)]` (`group_options`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection, Mapping
from dataclasses import MISSING, fields
from typing import Any, get_type_hints

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


def group_options(
    group: type[Any], names: Collection[str] | None = None
) -> dict[str, tuple[Any, Any]]:
    """A dataclass group's options, name -> (annotation, default), in field order (only
    `names` where given); a field without a default is a required option."""
    annotations = get_type_hints(group, include_extras=True)
    return {
        each.name: (
            annotations[each.name],
            inspect.Parameter.empty if each.default is MISSING else each.default,
        )
        for each in fields(group)
        if names is None or each.name in names
    }


class OptionalGroup:
    """A dataclass group whose every option defaults to not given (None or False)."""

    def load_options(self) -> dict[str, Any]:
        """The options given (neither None nor False), as data options by name."""
        return {
            name: value
            for name, value in vars(self).items()
            if value is not None and value is not False
        }

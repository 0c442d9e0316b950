"""A typer command group that imports a command's module only when the command runs.

Most commands need torch; listing them (`adaptlab --help`) should not. The group lists each
command with the summary typer would show (the first paragraph of its help), read from its
module's source, and imports the module when the command is invoked or asked for its help.
Help that is made when the module is imported (from a registry) goes in the module's
`EPILOGS`, by function name, and is shown after the command's options.
"""

from __future__ import annotations

import ast
import functools
import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:  # typer's own copy of click
    from typer._click import Command, Context, HelpFormatter

Target = tuple[str, str]
"""Where a command lives: its module (under adaptlab.cli) and the function there, or the typer
app of a group of commands."""


def lazy_group(commands: Mapping[str, Target]) -> type[TyperGroup]:
    """A group class (for `typer.Typer(cls=...)`) holding `commands`, in listing order."""

    class LazyGroup(TyperGroup):
        def __init__(self, **settings: Any) -> None:
            super().__init__(**settings)
            self.loaded: set[str] = set()
            for name in commands:  # listed by name; the help is read when it is shown
                self.add_command(TyperCommand(name))

        def resolve_command(
            self, ctx: Context, args: list[str]
        ) -> tuple[str | None, Command | None, list[str]]:
            name = args[0] if args else ""
            if name in commands and name not in self.loaded:
                self.commands[name] = _load(name, commands[name])
                self.loaded.add(name)
            return super().resolve_command(ctx, args)

        def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
            for name in commands.keys() - self.loaded:
                self.commands[name].help = summary(*commands[name])
            super().format_help(ctx, formatter)

    return LazyGroup


def summary(module: str, attribute: str) -> str:
    """The help of `attribute` in adaptlab.cli.`module` (a command's docstring, or the `help`
    given to a typer app), read from the module's source without running it."""
    for node in _source(module).body:
        if isinstance(node, ast.FunctionDef) and node.name == attribute:
            return ast.get_docstring(node) or ""
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == [attribute]:
            keywords = node.value.keywords if isinstance(node.value, ast.Call) else []
            return next((str(ast.literal_eval(k.value)) for k in keywords if k.arg == "help"), "")
    raise LookupError(f"adaptlab.cli.{module} defines no command {attribute}")


@functools.cache
def _source(module: str) -> ast.Module:
    return ast.parse((Path(__file__).parent / f"{module}.py").read_text(encoding="utf-8"))


def _load(name: str, target: Target) -> Command:
    """The click command of `target`, its module imported now."""
    module, attribute = target
    loaded = importlib.import_module(f"adaptlab.cli.{module}")
    found = getattr(loaded, attribute)
    if isinstance(found, typer.Typer):
        group = typer.main.get_group(found)
        group.name = name
        return group
    single = typer.Typer(add_completion=False)
    single.command(name, epilog=getattr(loaded, "EPILOGS", {}).get(attribute))(found)
    return typer.main.get_command(single)

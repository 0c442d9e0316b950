"""Package faces that import on first use, so that `import adaptlab`, the report, the records
and `adaptlab --help` load no torch until a name that needs it is used.

A package lists its public names as imports under `if TYPE_CHECKING:` (which type checkers
and readers follow; a submodule as `import package.sub as sub`; every public name of another
face as `from package.face import *`) and calls `lazy_face(__name__)`: each name then imports
its module the first time it is read.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

Source = tuple[str, str | None]
"""Where a public name comes from: a module, and the attribute (None: the module itself)."""


def lazy_face(package: str) -> None:
    """Make the package `package` (being imported) load each of its public names on first use.

    A submodule that shares a public name (`adaptlab.methods.adapt`, the module of the
    function `adapt`) never hides the name when it is imported.
    """
    module = sys.modules[package]
    sources = _type_checking_imports(Path(str(module.__file__)).read_text(encoding="utf-8"))

    class Face(ModuleType):
        def __getattr__(self, name: str) -> Any:
            if name not in sources:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            source, attribute = sources[name]
            found = importlib.import_module(source)
            value = found if attribute is None else getattr(found, attribute)
            self.__dict__[name] = value  # later reads find it without this call
            return value

        def __setattr__(self, name: str, value: Any) -> None:
            if not _shadows(sources, name, value):
                super().__setattr__(name, value)

        def __dir__(self) -> list[str]:
            return sorted({*self.__dict__, *sources})

    module.__class__ = Face


def _shadows(sources: dict[str, Source], name: str, value: object) -> bool:
    """Whether `value` is a submodule that the import system sets on its package under a public
    name standing for another object (the module `adapt` beside the function `adapt`)."""
    return (
        isinstance(value, ModuleType)
        and name in sources
        and sources[name] != (value.__name__, None)
    )


def _type_checking_imports(text: str) -> dict[str, Source]:
    """Every name imported under the module's top-level `if TYPE_CHECKING:` (`from m import a`,
    `from m import *` and `import m as a`, absolute), with where it comes from."""
    found: dict[str, Source] = {}
    for node in ast.parse(text).body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
                for alias in statement.names:
                    names = _public_names(statement.module) if alias.name == "*" else [alias.name]
                    found.update((alias.asname or name, (statement.module, name)) for name in names)
            elif isinstance(statement, ast.Import):
                for alias in statement.names:
                    if alias.asname:
                        found[alias.asname] = (alias.name, None)
    return found


def _public_names(face: str) -> list[str]:
    """The public names of the package face `face` (its `__all__`), imported: a face loads none
    of its names' modules until they are read."""
    return list(importlib.import_module(face).__all__)

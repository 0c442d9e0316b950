"""No two modules of the package import each other (a package face and its own submodules
included), counting every import: at the top, inside functions and for type checking only."""

from __future__ import annotations

import ast
from pathlib import Path

import adaptlab

ROOT = Path(adaptlab.__file__).parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, known: set[str]) -> set[str]:
    """The package's modules that `path` imports (a `from m import name` counts m.name too)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = node.module or ""
            source = ".".join([*base, module] if node.level else [module]).strip(".")
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)
    return (found & known) - {name}


def test_no_two_modules_import_each_other() -> None:
    paths = {module_name(path): path for path in ROOT.rglob("*.py")}
    graph = {name: imported(path, set(paths)) for name, path in paths.items()}
    mutual = sorted(
        {tuple(sorted((a, b))) for a, targets in graph.items() for b in targets if a in graph[b]}
    )
    assert mutual == []
    assert len(graph) > 200  # the whole package was read

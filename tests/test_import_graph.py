"""No two modules of the package import each other (a package face and its own submodules
included), and no chain of imports leads from a module back to itself, counting every import:
at the top, inside functions and for type checking only."""

from __future__ import annotations

import ast
from collections import deque
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


def package_graph() -> dict[str, set[str]]:
    """Every module of the package and the package's modules it imports."""
    paths = {module_name(path): path for path in ROOT.rglob("*.py")}
    return {name: imported(path, set(paths)) for name, path in paths.items()}


def reachable(graph: dict[str, set[str]], start: str) -> dict[str, str]:
    """Every module some chain of imports leads to from `start`, each with the module that
    imports it on a shortest such chain."""
    before: dict[str, str] = {}
    queue = deque([start])
    while queue:
        module = queue.popleft()
        for target in sorted(graph[module]):
            if target not in before:
                before[target] = module
                queue.append(target)
    return before


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest chain of imports from a module back to itself for every group of modules
    that lead to each other (through the group's first module by name), in name order."""
    reach = {module: reachable(graph, module) for module in graph}
    found, seen = [], set()
    for module in sorted(graph):
        if module in seen or module not in reach[module]:
            continue
        seen |= {other for other in reach[module] if module in reach[other]}
        chain, step = [module], reach[module][module]
        while step != module:
            chain.append(step)
            step = reach[module][step]
        found.append([module, *reversed(chain[1:]), module])
    return found


def test_no_chain_of_imports_leads_back_to_its_module() -> None:
    found = cycles(package_graph())
    assert found == [], "\n".join(" -> ".join(cycle) for cycle in found)


def test_no_two_modules_import_each_other() -> None:
    graph = package_graph()
    mutual = sorted(
        {tuple(sorted((a, b))) for a, targets in graph.items() for b in targets if a in graph[b]}
    )
    assert mutual == []
    assert len(graph) > 200  # the whole package was read

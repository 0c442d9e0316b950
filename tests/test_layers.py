"""The package is layered and its imports only point down: every module sits in a layer (its
folder's, or the bottom one for a top-level module such as `errors.py`), no import runs from a
layer to one above it, and the folders of one layer never import each other. Every import
counts, at the top, inside functions and for type checking only (`test_import_graph`)."""

from __future__ import annotations

from test_import_graph import ROOT, package_graph

LAYERS: tuple[tuple[str, ...], ...] = (
    ("backbone", "parallel"),
    ("models",),
    ("methods",),
    ("data",),
    ("tasks",),
    ("records",),
    ("engine",),
    ("runs",),
    ("continual",),
    ("analysis", "knowledge", "select", "integrations"),
    ("forgetting",),
    ("study",),
    ("report",),
    ("serve",),
    ("cli",),
)
"""The package's folders from the bottom up, after the top-level modules (layer 0). A task's
definition (`tasks`) sits below the engine and how a run of it is prepared (`runs`) above it:
the engine is handed a task and never looks one up from below. `models` finds the layers it
quantises with `backbone`; `forgetting` scores with `analysis`, `knowledge` and `integrations`."""
TOP_LEVEL = "top-level modules"
FACE = ("adaptlab", "adaptlab.__main__")
"""The package face and `python -m adaptlab`: above every layer, imported by nothing inside."""


def place(module: str) -> tuple[int, str] | None:
    """The layer of `module` (0: top-level modules) and what it is named by; None for a module
    of a folder no layer holds."""
    if module in FACE:
        return len(LAYERS) + 1, "the package face"
    folder = module.split(".")[1]
    if module.count(".") == 1 and not (ROOT / folder).is_dir():
        return 0, TOP_LEVEL
    for layer, folders in enumerate(LAYERS, start=1):
        if folder in folders:
            return layer, folder
    return None


def test_every_module_is_in_a_layer() -> None:
    graph = package_graph()
    unplaced = sorted({module.split(".")[1] for module in graph if place(module) is None})
    assert unplaced == [], f"place these folders in LAYERS of {__file__}: {', '.join(unplaced)}"
    listed = [folder for folders in LAYERS for folder in folders]
    assert len(listed) == len(set(listed)), "a folder is in two layers"
    missing = [folder for folder in listed if not (ROOT / folder / "__init__.py").is_file()]
    assert missing == [], f"LAYERS lists folders the package does not have: {missing}"
    assert len(graph) > 200  # the whole package was read


def test_no_import_runs_up_or_across_a_layer() -> None:
    offending = []
    for module, targets in sorted(package_graph().items()):
        here = place(module)
        assert here is not None
        for target in sorted(targets):
            there = place(target)
            assert there is not None
            up = there[0] > here[0]
            across = there[0] == here[0] and there[1] != here[1]
            if up or across:
                offending.append(
                    f"{module} -> {target} ({here[1]}, layer {here[0]} -> {there[1]}, "
                    f"layer {there[0]})"
                )
    assert offending == [], "imports that do not point down:\n" + "\n".join(offending)

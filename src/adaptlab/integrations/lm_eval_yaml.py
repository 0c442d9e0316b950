"""Why lm-eval may not know a task of the user's own folder (--harness-include): its index
skips, without a word, a task YAML file that does not parse. The first such file is named
with its line and YAML's problem, so the refusal of an unknown task says what to fix."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from adaptlab.errors import one_line

IGNORED_FOLDERS = ("__pycache__", ".ipynb_checkpoints")
"""Folders lm-eval's index does not read."""


class _TaskLoader(yaml.SafeLoader):
    """YAML as lm-eval's index reads it: any tag (its `!function`) taken as the text it holds,
    so only what does not parse fails."""


def _tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    return loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode) else None


_TaskLoader.add_multi_constructor("!", _tagged)


def task_folders(include: object) -> list[Path]:
    """The folders of an lm-eval `include_path` (a path, a list of them, or None)."""
    if include is None:
        return []
    listed = include if isinstance(include, list | tuple) else [include]
    return [Path(str(folder)) for folder in listed]


def unparsed_task_file(folders: Sequence[Path]) -> str | None:
    """The first task YAML file under `folders` that does not parse, as `FILE line N:
    problem` (None: every one parses)."""
    for folder in folders:
        for path in sorted(folder.glob("**/*.yaml"), key=lambda p: p.as_posix()):
            if any(part in IGNORED_FOLDERS for part in path.parts):
                continue
            problem = _yaml_problem(path)
            if problem is not None:
                return problem
    return None


def _yaml_problem(path: Path) -> str | None:
    """`FILE line N: problem` for a file that does not parse as YAML, else None."""
    try:
        yaml.load(path.read_text(encoding="utf-8"), Loader=_TaskLoader)  # noqa: S506
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = f" line {mark.line + 1}" if mark is not None else ""
        return f"{path}{line}: {error.problem or error.context or one_line(error)}"
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as error:
        return f"{path}: {one_line(error)}"
    return None

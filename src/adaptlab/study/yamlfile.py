"""Read a YAML file keeping its node tree, so validation errors can name the line of a key.

Two fixes over plain `yaml.safe_load`: numbers like `2e-5` are floats (PyYAML follows YAML 1.1
and would read them as strings), and a key given twice in one mapping is an error instead of
silently keeping the last value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from adaptlab.errors import ConfigError

_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.VERBOSE,
)


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads YAML 1.2 floats such as 2e-5 and 1E3 as numbers."""


_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))


@dataclass(frozen=True)
class YamlDocument:
    """The parsed data of one YAML file and its node tree (for line numbers)."""

    path: Path
    data: Any
    root: Node | None

    def locate(self, loc: Sequence[int | str]) -> tuple[int, str]:
        """The 1-based line and the key path (`methods[2].epochs`) of `loc`, as deep as it goes.

        Parts of `loc` that are not keys or indexes of the file (a validator's own labels)
        are passed over.
        """
        node, key = self.root, ""
        for part in loc:
            child = _child(node, part)
            if child is None:
                continue
            node = child
            key += f"[{part}]" if isinstance(part, int) else f".{part}" if key else str(part)
        return (node.start_mark.line + 1 if node is not None else 1), key


def read_yaml(path: Path) -> YamlDocument:
    """Parse `path`; a missing file or a syntax error ends in one line naming file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"study spec {path} not found") from None
    except IsADirectoryError:
        raise ConfigError(f"study spec {path} is a folder; give the spec's YAML file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read study spec {path}: {error}") from None
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is not None:
            _refuse_duplicate_keys(path, root)
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}{line}: not valid YAML: {error.problem}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    finally:
        loader.dispose()
    return YamlDocument(path, data, root)


def _child(node: Node | None, part: int | str) -> Node | None:
    if isinstance(node, MappingNode) and isinstance(part, str):
        for key, value in node.value:
            if isinstance(key, ScalarNode) and key.value == part:
                return value
    if isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        child: Node = node.value[part]
        return child
    return None


def _refuse_duplicate_keys(path: Path, node: Node) -> None:
    if isinstance(node, MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if isinstance(key, ScalarNode):
                if key.value in seen:
                    raise ConfigError(
                        f"{path} line {key.start_mark.line + 1}: key {key.value!r} is given twice"
                    )
                seen.add(key.value)
            _refuse_duplicate_keys(path, value)
    elif isinstance(node, SequenceNode):
        for item in node.value:
            _refuse_duplicate_keys(path, item)

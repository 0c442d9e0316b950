"""Composition blocks: how several named adapters run together (slides-adapters, AdapterHub).

- `Stack("lang", "task")`: at every site the adapters run in order, each on the output of the
  one before (MAD-X: a language adapter under a task adapter).
- `Fuse("a", "b", "c")`: AdapterFusion (Pfeiffer et al. 2021): at every site each adapter's
  output is computed from the same input and a trained attention over adapters mixes them.
- `Parallel("a", "b")`: the batch is copied once per branch and branch i runs adapter i on
  copy i, each with its own head; outputs come back stacked along the batch dimension.

Nesting (checked when a block is built): a Stack holds adapter names and Fuse blocks; a Fuse
holds adapter names; a Parallel holds adapter names and Stacks and is only ever the outermost
block. No adapter appears twice in one composition.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Union

from adaptlab.errors import ConfigError


def _check_children(block: str, children: tuple[object, ...], allowed: tuple[type, ...]) -> None:
    if not children:
        raise ConfigError(f"{block}() needs at least one adapter")
    for child in children:
        if isinstance(child, str):
            if not child:
                raise ConfigError(f"{block}: an adapter name is empty")
            continue
        if not isinstance(child, allowed):
            kinds = ", ".join(["adapter names", *(f"{t.__name__} blocks" for t in allowed)])
            raise ConfigError(
                f"{block} cannot hold {_describe(child)}; it holds {kinds}"
                + (" (Parallel must be the outermost block)" if isinstance(child, Parallel) else "")
            )


def _describe(child: object) -> str:
    if isinstance(child, Stack | Fuse | Parallel):
        return f"a {type(child).__name__} block"
    return f"{child!r}"


def _refuse_repeats(block: Block) -> None:
    seen: set[str] = set()
    for name in block.adapter_names():
        if name in seen:
            raise ConfigError(f"adapter {name!r} appears twice in {block}")
        seen.add(name)


class _Block:
    """Shared by the three blocks: children, names, equality, a readable form."""

    children: tuple[Any, ...]

    def adapter_names(self) -> Iterator[str]:
        """Every adapter name in the block, depth first, left to right."""
        for child in self.children:
            if isinstance(child, str):
                yield child
            else:
                yield from child.adapter_names()

    def to_data(self) -> dict[str, list[Any]]:
        """A JSON-ready form: {"stack": ["a", {"fuse": ["b", "c"]}]}."""
        return {
            type(self).__name__.lower(): [
                c if isinstance(c, str) else c.to_data() for c in self.children
            ]
        }

    def __repr__(self) -> str:
        inner = ", ".join(repr(c) if isinstance(c, str) else repr(c) for c in self.children)
        return f"{type(self).__name__}({inner})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.children == self.children  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.children))


@dataclass(frozen=True, init=False, eq=False, repr=False)
class Fuse(_Block):
    """AdapterFusion over adapters (names only)."""

    children: tuple[str, ...]

    def __init__(self, *children: str) -> None:
        _check_children("Fuse", children, ())
        object.__setattr__(self, "children", tuple(children))
        _refuse_repeats(self)


@dataclass(frozen=True, init=False, eq=False, repr=False)
class Stack(_Block):
    """Adapters run one after the other at every site (names and Fuse blocks)."""

    children: tuple[str | Fuse, ...]

    def __init__(self, *children: str | Fuse) -> None:
        _check_children("Stack", children, (Fuse,))
        object.__setattr__(self, "children", tuple(children))
        _refuse_repeats(self)


@dataclass(frozen=True, init=False, eq=False, repr=False)
class Parallel(_Block):
    """One copy of the batch per branch (names and Stacks); the outermost block only."""

    children: tuple[str | Stack, ...]

    def __init__(self, *children: str | Stack) -> None:
        _check_children("Parallel", children, (Stack,))
        object.__setattr__(self, "children", tuple(children))
        _refuse_repeats(self)


Block = Union[Stack, Fuse, Parallel]  # noqa: UP007 (a runtime alias used in isinstance)
Composition = Union[str, Stack, Fuse, Parallel]  # noqa: UP007
"""What can be active on a model: one adapter's name or a block."""

_BLOCKS: dict[str, type[_Block]] = {"stack": Stack, "fuse": Fuse, "parallel": Parallel}


def parse_composition(value: object) -> Composition:
    """A composition from its data form (manifests, specs): "a" or {"stack": ["a", ...]}."""
    if isinstance(value, str | Stack | Fuse | Parallel):
        return value
    if isinstance(value, Mapping) and len(value) == 1:
        ((kind, children),) = value.items()
        if kind in _BLOCKS and isinstance(children, list):
            parsed = [parse_composition(child) for child in children]
            return _BLOCKS[kind](*parsed)  # type: ignore[return-value]
    raise ConfigError(
        f"bad composition {value!r}: expected an adapter name or "
        "{stack|fuse|parallel: [names or blocks]}"
    )


def composition_names(composition: Composition | None) -> tuple[str, ...]:
    """Every adapter name in `composition` (none for None)."""
    if composition is None:
        return ()
    if isinstance(composition, str):
        return (composition,)
    return tuple(composition.adapter_names())

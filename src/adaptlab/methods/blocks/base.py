"""What every composition block shares, and the registry that finds blocks by name.

A composition says which named adapters run and how: one adapter's name, or a block over
adapter names and other blocks. A block carries its own behaviour, so the adapter state and
adapter folders ask it and never switch on its type:

- which children it may hold (`holds`, `outermost`; checked when it is built);
- what it refuses on a given model (`check`);
- the dispatch step it runs at a site (`step`, `adaptlab.methods.dispatch`);
- whose head runs (`head_owner`), the units it brings besides its adapters (`own_units`: a
  Fuse's fusion), hooks it needs on the model while it runs (`hooks`);
- whether an adapter's folder records it (`saved_with`) and its data form,
  {"<name>": [children]}, read back through `BLOCKS`.

A new block is one subclass registered in `BLOCKS` (``@BLOCKS.register``), in its own file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Union

from torch import nn
from torch.utils.hooks import RemovableHandle

from adaptlab.errors import ConfigError
from adaptlab.methods.dispatch import Step
from adaptlab.methods.handle import AdaptHandle
from adaptlab.registry import Registry

Composition = Union[str, "Block"]  # noqa: UP007 (a forward reference)
"""What can be active on a model, and what a block holds: one adapter's name or a block."""


class Adapters(Protocol):
    """What a block may ask of the adapters of the model it runs on."""

    @property
    def model(self) -> nn.Module: ...

    @property
    def units(self) -> Mapping[str, AdaptHandle]: ...

    @property
    def head_modules(self) -> Sequence[str]: ...

    def check(self, composition: Composition) -> None:
        """Refuse, in one line, a composition this model cannot run."""

    def step(self, composition: Composition, site: str) -> Step | None:
        """What `composition` runs at `site` (None: nothing)."""

    def head_owner(self, composition: Composition) -> AdaptHandle | None:
        """The unit whose head runs under `composition` (None: the base model's)."""

    def with_head(self, unit: AdaptHandle) -> AdaptHandle | None:
        """`unit` if it has its own head, else None."""

    def head_tensors(self, composition: Composition) -> dict[str, nn.Parameter]:
        """The head tensors that run under `composition`, by parameter name."""

    def require_separable(self, composition: Composition, block: str) -> None:
        """Refuse adapters in `composition` that `block` cannot run one per branch: those
        that train pretrained weights or act on more than a change at each site."""


@dataclass(frozen=True, init=False, eq=False, repr=False)
class Block(ABC):
    """A composition block: an immutable tuple of children, checked when built.

    A subclass sets `name` (its registry name and data-form key), `holds` (the blocks it may
    hold besides adapter names), `outermost` (if nothing may hold it), and builds its `step`
    and `head_owner`; the other behaviours default to following its child blocks.
    """

    name: ClassVar[str]
    holds: ClassVar[tuple[type[Block], ...]] = ()
    outermost: ClassVar[bool] = False
    children: tuple[Composition, ...]

    def __init__(self, *children: Composition) -> None:
        label = type(self).__name__
        if not children:
            raise ConfigError(f"{label}() needs at least one adapter")
        for child in children:
            self._check_child(child)
        object.__setattr__(self, "children", tuple(children))
        seen: set[str] = set()
        for name in self.adapter_names():
            if name in seen:
                raise ConfigError(f"adapter {name!r} appears twice in {self}")
            seen.add(name)

    def _check_child(self, child: object) -> None:
        label = type(self).__name__
        if isinstance(child, str):
            if not child:
                raise ConfigError(f"{label}: an adapter name is empty")
            return
        if isinstance(child, self.holds) and not child.outermost:
            return
        kinds = ", ".join(["adapter names", *(f"{t.__name__} blocks" for t in self.holds)])
        outermost = isinstance(child, Block) and child.outermost
        raise ConfigError(
            f"{label} cannot hold {_describe(child)}; it holds {kinds}"
            + (f" ({type(child).__name__} must be the outermost block)" if outermost else "")
        )

    # -- what the block is ------------------------------------------------------------------

    def adapter_names(self) -> Iterator[str]:
        """Every adapter name in the block, depth first, left to right."""
        for child in self.children:
            if isinstance(child, str):
                yield child
            else:
                yield from child.adapter_names()

    def blocks(self) -> Iterator[Block]:
        """The child blocks, left to right."""
        return (child for child in self.children if isinstance(child, Block))

    def to_data(self) -> dict[str, list[Any]]:
        """A JSON-ready form: {"stack": ["a", {"fuse": ["b", "c"]}]}."""
        return {self.name: [c if isinstance(c, str) else c.to_data() for c in self.children]}

    def renamed(self, old: str, new: str) -> Block:
        """This block with adapter `old` called `new`."""
        return type(self)(*(renamed(child, old, new) for child in self.children))

    # -- what the block does on a model -----------------------------------------------------

    def check(self, adapters: Adapters) -> None:
        """Refuse, in one line, what this block cannot run on `adapters` (its adapter names
        are known to exist); by default what its child blocks refuse."""
        for child in self.blocks():
            child.check(adapters)

    @abstractmethod
    def step(self, site: str, adapters: Adapters) -> Step | None:
        """What runs at `site` (None: the site's output passes through untouched)."""

    @abstractmethod
    def head_owner(self, adapters: Adapters) -> AdaptHandle | None:
        """The unit whose head runs (None: the base model's)."""

    def own_units(self, adapters: Adapters) -> list[AdaptHandle]:
        """Units that run besides the block's adapters (a Fuse's fusion); by default those
        of its child blocks."""
        return [unit for child in self.blocks() for unit in child.own_units(adapters)]

    def hooks(self, adapters: Adapters) -> list[RemovableHandle]:
        """Hooks on the model while the block runs, removed when it stops; by default those
        of its child blocks."""
        return [hook for child in self.blocks() for hook in child.hooks(adapters)]

    def saved_with(self, unit: AdaptHandle, adapters: Adapters) -> bool:
        """Whether the folder saved for `unit` while the block runs records the block (and
        holds its other adapters); by default not."""
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(repr(c) for c in self.children)})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.children == self.children  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.children))


BLOCKS: Registry[type[Block]] = Registry("composition block")
"""Every block by its name: what data forms (manifests, specs) are read with."""


def parse_composition(value: object) -> Composition:
    """A composition from its data form (manifests, specs): "a" or {"stack": ["a", ...]}."""
    if isinstance(value, str | Block):
        return value
    if isinstance(value, Mapping) and len(value) == 1:
        ((kind, children),) = value.items()
        if kind in BLOCKS and isinstance(children, list):
            return BLOCKS.get(kind)(*(parse_composition(child) for child in children))
    raise ConfigError(
        f"bad composition {value!r}: expected an adapter name or "
        f"{{{'|'.join(BLOCKS.names())}: [names or blocks]}}"
    )


def composition_names(composition: Composition | None) -> tuple[str, ...]:
    """Every adapter name in `composition` (none for None)."""
    if composition is None:
        return ()
    if isinstance(composition, str):
        return (composition,)
    return tuple(composition.adapter_names())


def renamed(composition: Composition, old: str, new: str) -> Composition:
    """`composition` with adapter `old` called `new`."""
    if isinstance(composition, str):
        return new if composition == old else composition
    return composition.renamed(old, new)


def _describe(child: object) -> str:
    return f"a {type(child).__name__} block" if isinstance(child, Block) else repr(child)

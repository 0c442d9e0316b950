"""Composition blocks: how several named adapters run together (slides-adapters, AdapterHub).

`Stack` runs adapters one on the other, `Fuse` mixes them by trained attention
(AdapterFusion), `Parallel` runs each on its own copy of the batch. Each block is one file
and registers itself in `BLOCKS` by the name its data form uses; `parse_composition` reads
any registered block. Nesting is checked when a block is built (a Stack holds names and Fuse
blocks, a Fuse names, a Parallel names and Stacks and nothing holds it), and no adapter
appears twice in one composition.
"""

from adaptlab.methods.blocks.base import (
    BLOCKS,
    Adapters,
    Block,
    Composition,
    composition_names,
    parse_composition,
    renamed,
)
from adaptlab.methods.blocks.fuse import Fuse
from adaptlab.methods.blocks.parallel import Parallel
from adaptlab.methods.blocks.stack import Stack

__all__ = [
    "BLOCKS",
    "Adapters",
    "Block",
    "Composition",
    "Fuse",
    "Parallel",
    "Stack",
    "composition_names",
    "parse_composition",
    "renamed",
]

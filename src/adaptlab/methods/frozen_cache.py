"""The frozen-activation cache: the frozen front's outputs, computed once, replayed after.

When what trains cannot change the output of the first k blocks for a given input (`head`,
`freeze`, Ladder Side-Tuning: the adapter state's `frozen_blocks`, see
`adaptlab.methods.frozen`), the first time a batch of examples is seen their outputs of
block k - 1 (and of every earlier block an inserted module reads, Ladder Side-Tuning's ladders)
are stored per example, real tokens only; when a batch of stored examples comes back, the
frozen blocks do not run: each returns its stored output (or passes its input through when
nothing reads it), re-padded to the batch, and the hooks at the blocks (ladders) run as before.
The embeddings still run (cheap), so the first block's input stays exact. That part runs
without dropout anyway, so the replayed outputs are what it would have computed, up to the
float rounding of a differently padded batch.

Outputs are kept in memory, or in float32 files in a scratch folder (beside the run) when
`mode` is "disk", or "auto" and they would take more than half the memory available. The
scratch files are deleted when training ends. "memory" or "disk" where what trains starts at
the first block is refused (`check_mode`); "auto" and "off" train on without a cache there.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from adaptlab.backbone.parts import get_module
from adaptlab.errors import ConfigError
from adaptlab.methods.site import OUTPUT
from adaptlab.methods.state import get_state

MODES = ("auto", "memory", "disk", "off")
DEFAULT_MODE = "auto"
"""Replay where the running adapter leaves a frozen front; say nothing where it does not."""
FORCED = ("memory", "disk")
"""The modes that ask for a cache: refused where there is nothing to cache."""


class FrozenCache:
    """Per example, the stored outputs of the frozen blocks something reads."""

    def __init__(self, blocks: list[nn.Module], recorded: list[int], folder: Path | None) -> None:
        self.blocks = blocks
        self.recorded = recorded
        self.folder = folder
        self.rows: dict[int, dict[int, Any]] = {j: {} for j in recorded}
        """Block -> example -> its stored output (a tensor, or (offset, length) on disk)."""
        self.structure: dict[int, int | None] = {}
        """Block -> None when it returns a tensor, else the length of the tuple it returns."""
        self._files: dict[int, Any] = {}
        self._maps: dict[int, np.ndarray] = {}

    @classmethod
    def create(
        cls,
        model: nn.Module,
        mode: str,
        features: Sequence[dict[str, Any]],
        folder: Path | None = None,
    ) -> FrozenCache | None:
        """A cache for `model`'s running adapter, or None where there is nothing to cache
        (`mode` "auto" or "off"; `check_mode` refuses "memory" and "disk" there)."""
        check_mode(model, mode)
        state = get_state(model)
        if mode == "off" or state is None or state.frozen_blocks == 0:
            return None
        frozen = state.frozen_blocks
        names = [b.name for b in state.backbone.blocks[:frozen]]
        read = {
            i.site
            for unit in state.units_in(state.active)
            for insertions in unit.insertions.values()
            for i in insertions
            if i.module.acts_on == OUTPUT
        }
        recorded = [j for j, name in enumerate(names) if name in read or j == frozen - 1]
        tokens = sum(len(f["input_ids"]) for f in features)
        size = tokens * state.backbone.hidden_size * 4 * len(recorded)
        on_disk = mode == "disk" or (mode == "auto" and size > _available_memory() // 2)
        scratch = None
        if on_disk:
            if folder is not None:
                folder.mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix="frozen-cache-", dir=folder))
        return cls([get_module(model, n) for n in names], recorded, scratch)

    @contextmanager
    def step(self, indices: Sequence[int], attention_mask: torch.Tensor | None) -> Iterator[None]:
        """Around one forward pass on the examples `indices`: record them, or replay them."""
        stored = all(i in self.rows[self.recorded[-1]] for i in indices)
        if stored:
            with self._replaying(indices, attention_mask):
                yield
        else:
            with self._recording(indices, attention_mask):
                yield

    def close(self) -> None:
        """Delete the scratch files (the cache is empty afterwards)."""
        for file in self._files.values():
            file.close()
        self._files, self._maps = {}, {}
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        self.rows = {j: {} for j in self.recorded}

    # -- recording -------------------------------------------------------------------------

    @contextmanager
    def _recording(self, indices: Sequence[int], mask: torch.Tensor | None) -> Iterator[None]:
        hooks: list[RemovableHandle] = []
        for j in self.recorded:

            def record(module: nn.Module, args: Any, output: Any, j: int = j) -> None:
                several = isinstance(output, tuple | list)  # OpenAI GPT's blocks give a list
                self.structure[j] = len(output) if several else None
                hidden = output[0] if several else output
                for row, example in enumerate(indices):
                    keep = slice(None) if mask is None else mask[row].bool()
                    self._store(j, example, hidden[row][keep].detach())

            hooks.append(self.blocks[j].register_forward_hook(record, prepend=True))
        try:
            yield
        finally:
            for hook in hooks:
                hook.remove()

    def _store(self, block: int, example: int, value: torch.Tensor) -> None:
        if self.folder is None:
            self.rows[block][example] = value.to("cpu", copy=True)
            return
        file = self._files.get(block)
        if file is None:
            file = self._files[block] = (self.folder / f"block{block}.f32").open("ab")
        data = value.to("cpu", torch.float32).contiguous().numpy()
        self.rows[block][example] = (file.tell() // 4, data.shape)
        file.write(data.tobytes())
        self._maps.pop(block, None)

    # -- replaying -------------------------------------------------------------------------

    @contextmanager
    def _replaying(self, indices: Sequence[int], mask: torch.Tensor | None) -> Iterator[None]:
        outputs = {j: self._assemble(j, indices, mask) for j in self.recorded}
        for j, block in enumerate(self.blocks):
            block.forward = self._stub(j, outputs.get(j))  # type: ignore[method-assign]
        try:
            yield
        finally:
            for block in self.blocks:
                del block.forward

    def _assemble(self, block: int, indices: Sequence[int], mask: torch.Tensor | None) -> Any:
        rows = [self._load(block, example) for example in indices]
        if mask is None:
            return torch.stack(rows)
        keep = mask.to("cpu", torch.bool)
        out = rows[0].new_zeros(*keep.shape, rows[0].shape[-1])
        for row, value in enumerate(rows):
            out[row][keep[row]] = value
        return out

    def _load(self, block: int, example: int) -> torch.Tensor:
        value = self.rows[block][example]
        if self.folder is None:
            return value  # type: ignore[no-any-return]
        if block not in self._maps:
            self._files[block].flush()
            self._maps[block] = np.memmap(self.folder / f"block{block}.f32", np.float32, "r")
        offset, shape = value
        count = int(np.prod(shape))
        return torch.from_numpy(np.array(self._maps[block][offset : offset + count])).view(shape)

    def _stub(self, block: int, output: torch.Tensor | None) -> Any:
        """A forward for frozen block `block`: its stored output, or its input passed on."""
        structure = self.structure.get(block, self.structure[self.recorded[-1]])

        def forward(*args: Any, **kwargs: Any) -> Any:
            given = _first(args, kwargs)
            value = given if output is None else output.to(given.device, given.dtype)
            return value if structure is None else (value, *([None] * (structure - 1)))

        return forward


def check_mode(model: nn.Module, mode: str) -> None:
    """Refuse a `mode` not in `MODES`, and "memory" or "disk" where what trains in `model`
    starts at the first block: no frozen front, nothing to cache."""
    if mode not in MODES:
        raise ConfigError(f"frozen cache must be one of {', '.join(MODES)}, got {mode!r}")
    state = get_state(model)
    if mode in FORCED and (state is None or state.frozen_blocks == 0):
        raise ConfigError(
            f"--frozen-cache {mode} has nothing to cache: the method trains from the first "
            "block, so no block before it is frozen; leave it auto or off"
        )


def _first(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return args[0] if args else kwargs.get("hidden_states", next(iter(kwargs.values()), None))


def _available_memory() -> int:
    """Bytes of memory available now (Linux), or a large number where it cannot be read."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62

"""The adapters in memory: loaded on first use, the least recently used leave past the caps.

A plain adapter is loaded onto the model its head shape shares (`SharedBase.shared_model`)
under its registry name, not activated; `Loaded.activate` makes it the one that runs (a
pointer swap: its modules, head and own weights in place). A fusion or stack gets a model
of its own, activated once, so the member adapters it brings never meet another entry's.
Causal-LM adapters share the base model's causal LM the same way. Adapters a caller still
runs (text being generated) are passed as `keep` and never evicted: while they run, the
caps may be passed. Only the model thread calls into the pool.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass

from torch import nn

from adaptlab.data.encoding import TextEncoder
from adaptlab.errors import AdapterFileError
from adaptlab.methods.adapt import active, delete_adapter, set_active
from adaptlab.methods.adapter_loading import load_adapter
from adaptlab.methods.blocks import composition_names
from adaptlab.serve.base import SharedBase
from adaptlab.serve.options import megabytes
from adaptlab.serve.registry import Entry
from adaptlab.tasks.registry import get_task


@dataclass
class Loaded:
    """An adapter in memory: the model it is on and the encoder for its task (none for a
    causal LM, which takes token ids)."""

    entry: Entry
    model: nn.Module
    encoder: TextEncoder | None

    def activate(self) -> None:
        """Make this adapter the one that runs on its model (a no-op for a fusion or stack)."""
        if not self.entry.composed and active(self.model) != self.entry.name:
            set_active(self.model, self.entry.name)

    def unload(self) -> None:
        if self.entry.composed:
            return  # its own model goes with the last reference to it
        if self.entry.name in composition_names(active(self.model)):  # alone, or in Rows
            set_active(self.model, None)
        delete_adapter(self.model, self.entry.name)


class AdapterPool:
    """At most `max_loaded` adapters and `max_bytes` of adapter tensors in memory."""

    def __init__(
        self, base: SharedBase, max_loaded: int, max_bytes: int, max_length: int = 128
    ) -> None:
        self.base = base
        self.max_loaded = max_loaded
        self.max_bytes = max_bytes
        self.max_length = max_length
        self._loaded: OrderedDict[str, Loaded] = OrderedDict()
        self._names: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        """The loaded adapters, least recently used first (safe to read from any thread)."""
        return list(self._names)

    @property
    def bytes(self) -> int:
        return sum(item.entry.bytes for item in self._loaded.values())

    def loaded(self, name: str) -> Entry | None:
        """The entry adapter `name` was loaded from, if it is in memory."""
        item = self._loaded.get(name)
        return item.entry if item is not None else None

    def get(self, entry: Entry, keep: Collection[str] = ()) -> Loaded:
        """`entry` in memory (loaded now if it is not), marked as the most recently used;
        adapters named in `keep` stay in memory."""
        item = self._loaded.get(entry.name)
        if item is not None and item.entry == entry:
            self._loaded.move_to_end(entry.name)
            self._names = tuple(self._loaded)
            return item
        if item is not None:  # its folder changed since it was loaded
            self.drop(entry.name)
        if entry.bytes > self.max_bytes:
            raise AdapterFileError(
                f"adapter {entry.name!r} has {megabytes(entry.bytes)} MB of tensors, above "
                f"--max-loaded-mb {megabytes(self.max_bytes)}"
            )
        evictable = [name for name in self._loaded if name not in keep]
        while evictable and (
            len(self._loaded) >= self.max_loaded or self.bytes + entry.bytes > self.max_bytes
        ):
            self.drop(evictable.pop(0))
        item = self._load(entry)
        self._loaded[entry.name] = item
        self._names = tuple(self._loaded)
        return item

    def drop(self, name: str) -> None:
        """Take adapter `name` out of memory, if it is there."""
        item = self._loaded.pop(name, None)
        self._names = tuple(self._loaded)
        if item is not None:
            item.unload()

    def _load(self, entry: Entry) -> Loaded:
        if entry.composed:
            model = self.base.new_model(entry.kind, entry.labels)
            load_adapter(model, entry.folder, name=entry.name)
        else:
            model = self.base.shared_model(entry.kind, entry.labels)
            head = entry.head.name if entry.head is not None else None
            load_adapter(model, entry.folder, name=entry.name, activate=False, head=head)
        encoder = (
            None
            if entry.causal
            else TextEncoder(
                self.base.tokenizer, get_task(entry.task), len(entry.labels), self.max_length
            )
        )
        return Loaded(entry=entry, model=model, encoder=encoder)

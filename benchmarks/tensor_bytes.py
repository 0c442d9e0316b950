"""Live tensor bytes, counted op by op, for real and fake (`FakeTensorMode`) tensors alike.

`LiveBytes` is a `TorchDispatchMode`: every storage an op returns that it has not seen is
added at its size when it appears and subtracted when it is freed (a weakref finalizer on the
storage: PyTorch keeps one Python object per storage, alive exactly as long as the storage),
and the highest total is kept. Fake tensors have (meta) storages with the real sizes, so the
same code counts a step that was never computed. What kernels allocate inside themselves
(scratch space) is not an op's output and is not counted, on real and fake tensors alike.

Storages created while `on_host()` is active are counted apart (`host`): the benchmark marks
copies that activation offloading moves to host memory that way, so `live` is what stays on
the accelerator.

`OpMode`, the base of `LiveBytes`, is the dispatch mode the benchmarks' other modes build on.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class OpMode(TorchDispatchMode):
    """A dispatch mode whose `run` sees every op, with its arguments and keyword arguments."""

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        return self.run(func, args, kwargs or {})

    def run(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """What the op `func` called with `args` and `kwargs` returns here: its own result."""
        return func(*args, **kwargs)


class LiveBytes(OpMode):
    """Running total and peak of the bytes of live storages (accelerator side) and of those
    marked as host copies; enter it before anything to count is made."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self.host = 0
        self.host_peak = 0
        self.peak_op = ""
        """The op whose output made the (accelerator-side) peak."""
        self._op = ""
        self._sizes: dict[int, tuple[int, bool]] = {}  # id(storage) -> (bytes, on host)
        self._on_host = 0

    @contextlib.contextmanager
    def on_host(self) -> Iterator[None]:
        """Count the storages created inside as host memory."""
        self._on_host += 1
        try:
            yield
        finally:
            self._on_host -= 1

    def reset_peak(self) -> None:
        """Start a new peak from what is live now."""
        self.peak, self.peak_op = self.live, ""
        self.host_peak = self.host

    def is_host(self, tensor: torch.Tensor) -> bool:
        """Whether `tensor`'s storage was counted as a host copy."""
        entry = self._sizes.get(id(tensor.untyped_storage()))
        return entry is not None and entry[1]

    def run(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        out = func(*args, **kwargs)
        self._op = str(func)
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                self._track(leaf.untyped_storage())
        return out

    def _track(self, storage: torch.UntypedStorage) -> None:
        """Add a new storage (or a resized one's change) to the totals."""
        key = id(storage)
        size = storage.nbytes()
        old, host = self._sizes.get(key, (None, self._on_host > 0))
        if old == size:
            return
        if old is None:
            weakref.finalize(storage, self._free, key)
        self._sizes[key] = (size, host)
        self._add(size - (old or 0), host)

    def _free(self, key: int) -> None:
        size, host = self._sizes.pop(key)
        self._add(-size, host)

    def _add(self, change: int, host: bool) -> None:
        if host:
            self.host += change
            self.host_peak = max(self.host_peak, self.host)
        else:
            self.live += change
            if self.live > self.peak:
                self.peak, self.peak_op = self.live, self._op

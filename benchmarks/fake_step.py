"""Run a transformers + bitsandbytes training step on fake tensors, as a real step runs.

Fake tensors (`FakeTensorMode`) have shapes, dtypes and storages but no data, so a step at
1.1B parameters and 32k tokens costs seconds. Three things differ from a real step unless
`fake_step()` sees to them; each is checked by counting the same step real and fake
(`large_model_memory.py`'s check lines):

- `nn.Module.to` swaps a fake parameter for its converted copy (`torch.utils.swap_tensors`),
  which refuses tensors that have weak references, and the mode's converter memoises every op
  output under one. Memoising an output is useless (its key, a fresh meta tensor, is never
  looked up again), so the mode here does not; real tensors converted to fake still are.
- bitsandbytes' 4-bit weight, `Params4bit`, is a tensor subclass made with
  `Tensor._make_subclass`, which cannot wrap a fake tensor. Here it becomes a fake
  `nn.Parameter` holding what `Params4bit` would hold: the packed 4-bit data, quantised by
  bitsandbytes' own `quantize_4bit` (its registered fake op: the real op's shapes and dtypes)
  when it is made on or moved to a device, with the same attributes (`quant_state`, ...),
  which a fake parameter made from it (as `nn.Module.to` makes one) takes along.
- transformers cannot read a fake tensor's values, so it builds the causal mask a real step
  skips after checking that the positions hold one unpacked sequence
  (`find_packed_sequence_indices`). Every step here is one unpacked sequence, so the check
  gives what it gives on real tensors: None.

And two that concern adaptlab: its fingerprint of the base hashes the weights' values, which
fake tensors do not have (names and shapes stand in; nothing the step keeps depends on it),
and its chunked loss keeps the positions whose next label is not ignored with a boolean mask,
whose result size depends on the values. No label is ignored in these steps, so every boolean
index here selects everything: `x[mask]` is a contiguous copy of `x` with the masked
dimensions flattened, and an index_put through such a mask writes the whole flattened view.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from unittest import mock

import torch
from tensor_bytes import OpMode
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode


@contextlib.contextmanager
def fake_step() -> Iterator[FakeTensorMode]:
    """Inside, tensors made are fake and a training step runs as it would on real ones."""
    import bitsandbytes as bnb
    from transformers import masking_utils

    state = importlib.import_module("adaptlab.methods.state")
    fingerprints = importlib.import_module("adaptlab.models.fingerprint")  # the module

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    mode.fake_tensor_converter.set_tensor_memo = lambda t, v: None  # type: ignore[method-assign]
    real_new = bnb.nn.Params4bit.__new__
    real_parameter = nn.Parameter.__new__

    def params4bit(cls: type, data: torch.Tensor | None = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(data, FakeTensor):
            return _fake_params4bit(data, *args, **kwargs)
        return real_new(cls, data, *args, **kwargs)

    def parameter(cls: type, data: torch.Tensor | None = None, requires_grad: bool = True) -> Any:
        made: Any = real_parameter(cls, data, requires_grad)
        if isinstance(data, FakeTensor) and _FAKE_4BIT in data.__dict__:
            made.__dict__.update({k: v for k, v in data.__dict__.items() if k != "_is_param"})
        return made

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(bnb.nn.Params4bit, "__new__", params4bit))
        stack.enter_context(mock.patch.object(nn.Parameter, "__new__", parameter))
        stack.enter_context(
            mock.patch.object(masking_utils, "find_packed_sequence_indices", lambda ids: None)
        )
        for module in (fingerprints, state):
            stack.enter_context(
                mock.patch.object(
                    module, "fingerprint", _shape_fingerprint(fingerprints.fingerprint)
                )
            )
        stack.enter_context(mode)
        stack.enter_context(_FullMasks())
        yield mode


def _shape_fingerprint(real: Callable[..., str]) -> Callable[..., str]:
    """adaptlab's fingerprint, from names and shapes when the weights are fake."""

    def fingerprint(model: nn.Module, exclude: Iterable[str] = ()) -> str:
        if not any(isinstance(p, FakeTensor) for p in model.parameters()):
            return real(model, exclude)
        shapes = sorted((n, tuple(p.shape)) for n, p in model.named_parameters())
        return hashlib.sha256(repr(shapes).encode()).hexdigest()[:16]

    return fingerprint


class _FullMasks(OpMode):
    """Boolean indexing as when every mask is all True (see the module's docstring)."""

    def run(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if func in _INDEX_PUTS or func is torch.ops.aten.index.Tensor:
            target, indices = args[0], args[1]
            if len(indices) == 1 and indices[0] is not None and indices[0].dtype == torch.bool:
                flat = target.flatten(0, indices[0].dim() - 1)
                if func is torch.ops.aten.index.Tensor:
                    return flat.clone(memory_format=torch.contiguous_format)
                accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
                if func is not torch.ops.aten.index_put_.default and func not in _IN_PLACE:
                    target = target.clone()
                    flat = target.flatten(0, indices[0].dim() - 1)
                values = args[2].expand_as(flat)
                flat.add_(values) if accumulate else flat.copy_(values)
                return target
        return func(*args, **kwargs)


_FAKE_4BIT = "_fake_params4bit"
"""Marks the fake parameters that stand for a `Params4bit`."""
_IN_PLACE = (torch.ops.aten.index_put_.default, torch.ops.aten._index_put_impl_.default)
_INDEX_PUTS = (*_IN_PLACE, torch.ops.aten.index_put.default)


def _fake_params4bit(
    data: torch.Tensor,
    requires_grad: bool = False,
    quant_state: Any = None,
    blocksize: int | None = None,
    compress_statistics: bool = True,
    quant_type: str = "fp4",
    quant_storage: torch.dtype = torch.uint8,
    module: nn.Module | None = None,
    bnb_quantized: bool = False,
    **_: Any,
) -> nn.Parameter:
    """A fake Parameter in place of `Params4bit(data, ...)`: quantised at once unless its data
    is on the meta device (a real `Params4bit` is quantised when `.to(device)` moves it there:
    every caller here moves it to the device it is already on), with `Params4bit`'s attributes."""
    import bitsandbytes as bnb

    blocksize = blocksize or 64
    if not bnb_quantized and data.device.type != "meta":
        data, quant_state = bnb.functional.quantize_4bit(
            data.contiguous(),
            blocksize=blocksize,
            compress_statistics=compress_statistics,
            quant_type=quant_type,
            quant_storage=quant_storage,
        )
        bnb_quantized = True
    param = nn.Parameter(data, requires_grad=requires_grad)
    param.__dict__.update(
        blocksize=blocksize,
        compress_statistics=compress_statistics,
        quant_type=quant_type,
        quant_state=quant_state,
        quant_storage=quant_storage,
        bnb_quantized=bnb_quantized,
        module=module,
        **{_FAKE_4BIT: True},
    )
    if module is not None and bnb_quantized:
        module.quant_state = quant_state
    return param

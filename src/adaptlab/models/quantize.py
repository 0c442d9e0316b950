"""A 4-bit or 8-bit frozen base: the linear layers of the transformer blocks replaced by
bitsandbytes' quantised ones.

4 bits is QLoRA's base (Dettmers et al. 2023, §3 and eq. 5-6): NF4 weights in blocks of 64,
their scales double-quantised (8-bit, blocks of 256), de-quantised on the fly and multiplied in
bfloat16. 8 bits is LLM.int8() (Dettmers et al. 2022, §3.2-3.3): int8 rows with one scale each,
input features above 6.0 kept in 16 bits. As in QLoRA, only the blocks' linear layers are
quantised: embeddings, norms, the task head and the LM head keep their precision (a 4-bit
layer's bias is held in the compute dtype, as bitsandbytes adds it).

A bnb layer is an `nn.Linear` with the same in / out features, so every method that leaves the
base frozen finds its sites on it. Before quantising, the model's fingerprint is recorded
(`adaptlab.models.fingerprint.record_fingerprint`), and `fingerprint` answers it from then on:
an adapter trained on the quantised base loads onto the full-precision one, and the reverse.

Torch and bitsandbytes are imported only when a model is quantised, so that records and the
command line read `QUANTIZE_KINDS` without them.
"""

from __future__ import annotations

import math
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

from adaptlab.errors import ConfigError
from adaptlab.quiet_logs import errors_only

if TYPE_CHECKING:
    import torch
    from torch import nn

QUANTIZE_KINDS = ("nf4", "int8")
"""What `--quantize` takes: QLoRA's 4-bit NormalFloat, or LLM.int8()'s 8 bits."""

BITS = {"nf4": "4-bit", "int8": "8-bit"}
NF4_BLOCK = 64
"""Weights per NF4 scale (QLoRA §3: blocks of 64), bitsandbytes' default."""
INT8_THRESHOLD = 6.0
"""LLM.int8()'s outlier threshold (Dettmers et al. 2022, §3.3: alpha = 6)."""
QUANTIZED_ATTRIBUTE = "_adaptlab_quantized"
"""Set on a model by `quantize_base`: the kind its blocks' linear layers were quantised to."""
INT8_DTYPE_ATTRIBUTE = "_adaptlab_dtype"
"""Set on an 8-bit layer by `quantize_base`: the dtype of the weights it was quantised from
(a 4-bit layer's quantisation state keeps it)."""


def quantize_base(model: nn.Module, kind: str, compute_dtype: torch.dtype | None = None) -> int:
    """Replace every linear layer inside `model`'s transformer blocks by a bnb one of `kind`
    (nf4: `Linear4bit`, double-quantised; int8: `Linear8bitLt`), on the device it is on, and
    return how many were replaced.

    Call it on the loaded base before any adapter is added; the fingerprint of the original
    weights is recorded first. `compute_dtype` (nf4 only; None: bfloat16, as QLoRA computes):
    what the de-quantised weights multiply in.
    """
    from torch import nn

    from adaptlab.backbone.discovery import find_backbone
    from adaptlab.backbone.linear import is_conv1d
    from adaptlab.backbone.parts import get_module, is_inserted
    from adaptlab.models.fingerprint import record_fingerprint

    check_quantize_kind(kind)
    done = quantized_kind(model)
    if done is not None:
        raise ConfigError(f"this model's base is already quantised ({done}); load it again")
    if any(is_inserted(name) for name, _ in model.named_modules()):
        raise ConfigError("quantise the base model before adding adapters to it")
    bnb = _bitsandbytes()
    parts = find_backbone(model)
    linears = {
        f"{block.name}.{name}": module
        for block in parts.blocks
        for name, module in get_module(model, block.name).named_modules()
        if type(module) is nn.Linear or is_conv1d(module)  # not a subclass: a bnb layer is one
    }
    if kind == "nf4":
        _check_cpu_widths(bnb, linears)
    record_fingerprint(model, exclude=parts.head)
    for name, layer in linears.items():
        parent, _, child = name.rpartition(".")
        setattr(get_module(model, parent), child, _quantized(bnb, layer, kind, compute_dtype))
    setattr(model, QUANTIZED_ATTRIBUTE, kind)
    return len(linears)


def check_quantize_kind(kind: str, option: str = "quantize") -> None:
    """One line unless `kind` is a kind `quantize_base` makes."""
    if kind not in QUANTIZE_KINDS:
        raise ConfigError(f"{option} must be one of {', '.join(QUANTIZE_KINDS)}; got {kind!r}")


def quantized_kind(model: nn.Module) -> str | None:
    """The kind `quantize_base` quantised `model`'s base to, or None."""
    return getattr(model, QUANTIZED_ATTRIBUTE, None)


def layer_kind(layer: nn.Module) -> str | None:
    """'nf4' (or bnb's other 4-bit type, 'fp4') or 'int8' for a bnb quantised linear layer,
    else None. Without bitsandbytes imported, no layer can be one of its own."""
    bnb = sys.modules.get("bitsandbytes")
    if bnb is None:
        return None
    if isinstance(layer, bnb.nn.Linear4bit):
        return str(layer.weight.quant_type)
    if isinstance(layer, bnb.nn.Linear8bitLt):
        return "int8"
    return None


def layer_bits(layer: nn.Module) -> str | None:
    """'4-bit' or '8-bit' for a quantised linear layer, for messages; else None."""
    kind = layer_kind(layer)
    return None if kind is None else BITS.get(kind, "4-bit")


def dense_weight(layer: nn.Linear) -> torch.Tensor:
    """`layer`'s weight as an (out, in) float matrix: de-quantised for a bnb layer (what DoRA
    takes norms of), the weight itself otherwise."""
    kind = layer_kind(layer)
    if kind is None:
        return layer.weight
    functional = sys.modules["bitsandbytes"].functional
    quantized: Any = layer
    weight = quantized.weight
    if kind == "int8":  # the row scales move from the weight to the layer's state on a forward
        scales = weight.SCB if weight.SCB is not None else quantized.state.SCB
        return functional.int8_vectorwise_dequant(weight.data, scales)  # type: ignore[no-any-return]
    return functional.dequantize_4bit(weight.data, weight.quant_state)  # type: ignore[no-any-return]


def float_dtype(module: nn.Module) -> torch.dtype:
    """The dtype `module` holds its weights in, as a float model: that of its first parameter
    or, when a quantised linear layer comes first, of the weights it was quantised from (what
    modules inserted at `module` are made in)."""
    import torch

    for part in module.modules():
        kind = layer_kind(part)
        if kind == "int8":
            return getattr(part, INT8_DTYPE_ATTRIBUTE, torch.float16)  # bnb takes float16
        if kind is not None:
            quantized: Any = part
            return quantized.weight.quant_state.dtype  # type: ignore[no-any-return]
        for parameter in part.parameters(recurse=False):
            return parameter.dtype
    return torch.get_default_dtype()


def logical_numel(tensor: torch.Tensor) -> int:
    """How many weights `tensor` stands for: a packed 4-bit weight holds two per byte, and its
    quantisation state knows the original shape."""
    shape = getattr(getattr(tensor, "quant_state", None), "shape", None)
    return math.prod(shape) if shape is not None else tensor.numel()


def _check_cpu_widths(bnb: ModuleType, linears: dict[str, nn.Module]) -> None:
    """bitsandbytes' CPU kernel de-quantises NF4 wrongly (whole rows off by tens of percent)
    when a layer's input width is even but not a multiple of the block (64): refuse that."""
    from adaptlab.backbone.linear import out_in_weight

    for name, layer in linears.items():
        weight = out_in_weight(layer)
        width = weight.shape[1]
        if weight.device.type == "cpu" and width % NF4_BLOCK and width % 2 == 0:
            raise ConfigError(
                f"nf4: bitsandbytes {bnb.__version__} de-quantises correctly on the CPU only "
                f"layers whose input width is a multiple of {NF4_BLOCK}; {name!r} takes {width}: "
                "quantise on a GPU, or use int8"
            )


def _quantized(bnb: ModuleType, layer: nn.Module, kind: str, compute_dtype: Any) -> nn.Module:
    """A bnb layer holding `layer`'s weights quantised (an `nn.Linear`'s, or a Conv1D's as the
    linear layer it is), and its bias (nf4: in the compute dtype, where bnb adds it)."""
    import torch

    from adaptlab.backbone.linear import out_in_weight

    weight = out_in_weight(layer).data.contiguous()
    device = weight.device
    bias_of = layer.bias
    assert bias_of is None or isinstance(bias_of, torch.Tensor)
    has_bias = bias_of is not None
    shape = (weight.shape[1], weight.shape[0])
    new: Any
    if kind == "nf4":
        new = bnb.nn.Linear4bit(
            *shape,
            bias=has_bias,
            compute_dtype=compute_dtype or torch.bfloat16,
            compress_statistics=True,
            quant_type="nf4",
            device="meta",
        )
        new.weight = bnb.nn.Params4bit(
            weight,
            requires_grad=False,
            blocksize=NF4_BLOCK,
            compress_statistics=True,
            quant_type="nf4",
            module=new,
        )
        # bnb would repack the weight in place for its CPU inference kernel on the first
        # forward without gradients (on CPUs with AVX512-BF16 only); keeping one layout keeps
        # training after evaluation, de-quantising and the results the same on every CPU.
        new.support_avx512bf16_for_cpu = False
    else:
        new = bnb.nn.Linear8bitLt(
            *shape,
            bias=has_bias,
            has_fp16_weights=False,
            threshold=INT8_THRESHOLD,
            device="meta",
        )
        # Int8Params quantises when it moves from the CPU to a device (the CPU included)
        new.weight = bnb.nn.Int8Params(
            weight.to("cpu"), requires_grad=False, has_fp16_weights=False
        )
        setattr(new, INT8_DTYPE_ATTRIBUTE, weight.dtype)
    if bias_of is not None:
        bias = bias_of.data
        if kind == "nf4":  # bnb would turn it to the compute dtype on the first forward
            bias = bias.to(new.compute_dtype)
        new.bias = torch.nn.Parameter(bias, requires_grad=False)
    new.train(layer.training)
    return new.to(device)  # type: ignore[no-any-return]


def _bitsandbytes() -> ModuleType:
    """bitsandbytes, imported without its notice that an optional CPU kernel package is absent;
    a one-line error when it is not installed."""
    try:
        with errors_only("bitsandbytes"):
            import bitsandbytes
    except ImportError as error:
        raise ConfigError(
            f"quantize needs bitsandbytes ({error}): pip install bitsandbytes"
        ) from None
    return bitsandbytes

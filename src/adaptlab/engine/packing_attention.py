"""How packed examples are kept from attending to one another, by attention implementation.

SDPA and eager attention take a 4D mask passed as `attention_mask`: transformers hands a 4D
mask to the attention functions as it is (`masking_utils._preprocess_mask_arguments`), SDPA
reading a boolean one (True attends), eager adding a float one (0 attends, the dtype's minimum
does not). That one mask reaches every layer, sliding-window layers included, so a model whose
window is shorter than an example cannot be packed this way. Flash attention takes no mask:
transformers finds the examples of a single flattened row from `position_ids` restarting at 0
and runs the variable-length kernel (`modeling_flash_attention_utils._is_packed_sequence`),
each layer with its own window.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from adaptlab.errors import ConfigError
from adaptlab.methods.attention import original_implementation

MASKED = ("sdpa", "eager")
"""Implementations given a block-diagonal causal 4D mask."""
FLATTENED = ("flash_attention_2", "flash_attention_3")
"""Implementations given one row of every example and `position_ids` only."""
PACKABLE = MASKED + FLATTENED


def checked_attention(attention: str) -> str:
    """`attention` if packing supports it, else a one-line ConfigError naming it."""
    if attention not in PACKABLE:
        raise ConfigError(
            f"packing does not support attention implementation {attention!r}; load the model "
            f"with attn_implementation {' / '.join(PACKABLE)}, or train without packing"
        )
    return attention


def packing_attention(model: nn.Module, max_length: int) -> str:
    """The attention implementation `model` runs (what `collate_packed` takes), refused in one
    line where packed examples of up to `max_length` tokens would not run as they do alone."""
    config: Any = model.config
    text = (
        config.get_text_config() if callable(getattr(config, "get_text_config", None)) else config
    )
    attention = checked_attention(
        str(original_implementation(getattr(config, "_attn_implementation", None)))
    )
    window = sliding_window(text)
    if attention in MASKED and window is not None and window < max_length:
        raise ConfigError(
            f"{type(model).__name__} has a {window}-token sliding window, shorter than "
            f"max_length {max_length}: packing with {attention} attention gives every layer one "
            f"mask; use max_length <= {window}, flash attention, or train without packing"
        )
    return attention


def sliding_window(config: object) -> int | None:
    """The window of `config`'s sliding-window layers, None when it has none (a window with
    no `layer_types` covers every layer, as Mistral's)."""
    window = getattr(config, "sliding_window", None)
    layer_types = getattr(config, "layer_types", None)
    if window is None or (layer_types is not None and "sliding_attention" not in layer_types):
        return None
    return int(window)


def block_causal_mask(segments: torch.Tensor, attention: str) -> torch.Tensor:
    """The (rows, 1, length, length) mask letting each position of `segments` (rows, length:
    the number of the example each position belongs to) attend to the positions before it in
    the same example: boolean for SDPA, additive float32 for eager."""
    length = segments.shape[1]
    same = segments[:, :, None] == segments[:, None, :]
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    allowed = (same & causal)[:, None]
    if attention == "sdpa":
        return allowed
    blocked = torch.full(allowed.shape, torch.finfo(torch.float32).min)
    return blocked.masked_fill(allowed, 0.0)

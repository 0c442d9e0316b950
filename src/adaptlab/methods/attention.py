"""Extra keys and values for attention modules, through transformers' attention interface.

Prefix tuning (Li & Liang 2021; He et al. 2022 §2.2, eq. 3) prepends l learned key and value
vectors to every attention. transformers computes attention in a function it looks up by
the name in ``config._attn_implementation`` (``sdpa``, ``eager``, ...); while prefixes run,
that name points to a wrapper registered here, which prepends the prefixes of the module it is
called for (after any key-value cache, after rotary embeddings), extends the attention mask by
l attended columns, and calls the original implementation. Positions are not touched: the
prefixes sit outside the sequence, so every token keeps its position, with or without padding
and a key-value cache, and a module without prefixes runs exactly as before.

Models whose attention does not go through the interface (MPNet computes it in its own code)
cannot take prefixes without re-implementing their forward; `check_attention` says so.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any
from weakref import WeakKeyDictionary

import torch
from torch import nn

from adaptlab.errors import ConfigError
from adaptlab.methods.site import AttentionModule

WRAPPED = ("sdpa", "eager")
"""Attention implementations prefixes can wrap; flash and flex kernels take other mask forms."""
_PREFIX = "adaptlab-prefix+"

_prefixes: WeakKeyDictionary[nn.Module, tuple[AttentionModule, ...]] = WeakKeyDictionary()
"""Attention module -> the prefix modules that run there now (set by the adapter state)."""


def check_attention(model: nn.Module, attention: nn.Module, name: str, method: str) -> None:
    """Refuse, in one line, an attention module that prefixes cannot reach."""
    source = sys.modules.get(type(attention).__module__)
    config = getattr(attention, "config", None) or getattr(model, "config", None)
    if source is None or not hasattr(source, "ALL_ATTENTION_FUNCTIONS"):
        raise ConfigError(
            f"{method}: {type(model).__name__} computes attention in its own code "
            f"({type(attention).__name__} at {name!r}), not through transformers' attention "
            "functions, so keys and values cannot be added without re-implementing its forward"
        )
    implementation = original_implementation(getattr(config, "_attn_implementation", None))
    if implementation not in WRAPPED:
        raise ConfigError(
            f"{method}: attention implementation {implementation!r} is not supported; load the "
            "model with attn_implementation='sdpa' or 'eager'"
        )
    if implementation == "eager" and not hasattr(source, "eager_attention_forward"):
        raise ConfigError(
            f"{method}: {type(attention).__name__} has no eager_attention_forward; load the "
            "model with attn_implementation='sdpa'"
        )


def original_implementation(name: str | None) -> str | None:
    """The implementation a (possibly wrapped) name stands for."""
    return name.removeprefix(_PREFIX) if name else name


def attention_config(attention: nn.Module, model: nn.Module) -> Any:
    """The config whose attention implementation `attention` looks up."""
    return getattr(attention, "config", None) or model.config


def set_prefixes(
    modules: list[nn.Module], plan: dict[nn.Module, tuple[AttentionModule, ...]]
) -> None:
    """Make `plan` the prefixes that run on `modules` (one model's attention modules)."""
    for module in modules:
        _prefixes.pop(module, None)
    _prefixes.update(plan)


def point(configs: list[Any], wrapped: bool) -> None:
    """Point `configs` at the prefix wrapper of their implementation, or back at their own."""
    for config in configs:
        original = original_implementation(config._attn_implementation) or "eager"
        if wrapped:
            _register(original)
            config._attn_implementation = _PREFIX + original
        else:
            config._attn_implementation = original


def _register(original: str) -> None:
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    from transformers.modeling_utils import AttentionInterface

    name = _PREFIX + original
    if name not in AttentionInterface._global_mapping:
        AttentionInterface.register(name, _prefixed(original))
        AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[original])


def _prefixed(original: str) -> Callable[..., Any]:
    """An attention function that prepends the module's prefixes, then runs `original`."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    def attention(
        module: nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        **kwargs: Any,
    ) -> Any:
        if original == "eager":
            inner = sys.modules[type(module).__module__].eager_attention_forward
        else:
            inner = ALL_ATTENTION_FUNCTIONS[original]
        modules = _prefixes.get(module, ())
        if not modules:
            return inner(module, query, key, value, attention_mask, **kwargs)
        batch, heads, _, head_dim = key.shape
        pairs = [m.keys_values() for m in modules]
        prefix_keys = torch.cat([k for k, _ in pairs]).to(key.dtype)
        prefix_values = torch.cat([v for _, v in pairs]).to(value.dtype)
        length = prefix_keys.shape[0]

        def heads_first(x: torch.Tensor) -> torch.Tensor:  # (l, heads * dim) -> (b, heads, l, dim)
            return x.view(length, heads, head_dim).transpose(0, 1).expand(batch, -1, -1, -1)

        key = torch.cat([heads_first(prefix_keys), key], dim=2)
        value = torch.cat([heads_first(prefix_values), value], dim=2)
        if kwargs.get("position_bias") is not None:  # T5's relative bias: none for prefixes
            kwargs["position_bias"] = nn.functional.pad(kwargs["position_bias"], (length, 0))
        causal = kwargs.pop("is_causal", None)
        causal = causal if causal is not None else getattr(module, "is_causal", True)
        implicit_causal = original == "sdpa" and bool(causal) and query.shape[2] > 1
        attention_mask = _extend_mask(attention_mask, length, query, key, implicit_causal)
        return inner(module, query, key, value, attention_mask, is_causal=False, **kwargs)

    return attention


def _extend_mask(
    mask: torch.Tensor | None, length: int, query: torch.Tensor, key: torch.Tensor, causal: bool
) -> torch.Tensor | None:
    """`mask` with `length` attended columns in front (made explicit when sdpa's implicit
    causal mask, aligned to the last query, was meant)."""
    if mask is None and not causal:
        return None
    if mask is None:
        queries, keys = query.shape[2], key.shape[2] - length
        rows = torch.arange(queries, device=query.device)[:, None] + (keys - queries)
        mask = (rows >= torch.arange(keys, device=query.device)[None, :])[None, None]
    if mask.dtype == torch.bool:
        front = torch.ones(*mask.shape[:-1], length, dtype=torch.bool, device=mask.device)
    else:  # additive: 0 attends
        front = torch.zeros(*mask.shape[:-1], length, dtype=mask.dtype, device=mask.device)
    return torch.cat([front, mask], dim=-1)

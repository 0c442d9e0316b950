"""A language model with its tokenizer and FFN neuron layers, masked or causal, for fact prompts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from torch import nn
from transformers import (
    AutoConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

from adaptlab.backbone.discovery import find_backbone
from adaptlab.backbone.linear import features
from adaptlab.backbone.parts import get_module
from adaptlab.errors import ConfigError, ModelNotFoundError
from adaptlab.methods.layer_weight import weight_matrix
from adaptlab.methods.state import get_state
from adaptlab.models.builtin import BUILTIN_MODELS
from adaptlab.models.decoder import check_causal_lm
from adaptlab.models.device import torch_device
from adaptlab.models.loading import load_model
from adaptlab.models.quiet import quiet_transformers
from adaptlab.models.resolve import load_errors, resolve_model

LMKind = Literal["masked", "causal"]


@dataclass
class KnowledgeLM:
    """A model whose FFN intermediate neurons are attributed, probed and edited.

    `ffn_out[l]` is block l's FFN output (down) projection: its input is the intermediate
    activation, one value per neuron (for gated FFNs the product of gate and up projections).
    `blocks[l]` is block l itself. `window` is the most tokens the model reads at once (None
    when its config states no limit).
    """

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    kind: LMKind
    ffn_out: list[nn.Module]
    blocks: list[nn.Module]
    model_id: str = ""
    window: int | None = None

    @property
    def num_layers(self) -> int:
        return len(self.ffn_out)

    @property
    def num_neurons(self) -> int:
        return features(self.ffn_out[0])[0]

    def value_slots(self, layer: int) -> torch.Tensor:
        """Block `layer`'s FFN output weight as (hidden, neurons), sharing its storage: column
        i is neuron i's value slot (GPT-2's Conv1D stores it as a row; this is a view)."""
        return weight_matrix(self.ffn_out[layer]).detach()


def wrap_lm(
    model: nn.Module, tokenizer: PreTrainedTokenizerBase, kind: LMKind, model_id: str = ""
) -> KnowledgeLM:
    """Find `model`'s FFN output projections (via backbone discovery) and put it in eval mode.

    An adapted model's layout is the one found before its adapters' modules were inserted
    (they sit inside the layers they adapt, where discovery could take them for parts).
    """
    if kind not in ("masked", "causal"):
        raise ConfigError(f"unknown language-model kind {kind!r}; choose masked or causal")
    if kind == "masked" and tokenizer.mask_token_id is None:
        raise ConfigError(
            f"{type(model).__name__}: a masked LM needs a tokenizer with a mask token"
        )
    if getattr(model.config, "final_logit_softcapping", None):
        raise ConfigError(
            f"{type(model).__name__}: final logit softcapping is not supported; attribution "
            "takes the logits to be the LM head's output W h + b"
        )
    state = get_state(model)
    backbone = state.backbone if state is not None else find_backbone(model)
    if backbone.blocks[0].experts is not None:
        raise ConfigError(
            f"{type(model).__name__}: its FFN is a mixture of experts, and knowledge neurons "
            "are the intermediate units of one dense FFN per block"
        )
    layers = [get_module(model, block.ffn_out) for block in backbone.blocks]
    blocks = [get_module(model, block.name) for block in backbone.blocks]
    assert isinstance(model, PreTrainedModel)
    window = model_window(model, get_module(model, backbone.embeddings))
    return KnowledgeLM(model.eval(), tokenizer, kind, layers, blocks, model_id, window)


def model_window(model: nn.Module, embeddings: nn.Module) -> int | None:
    """The most positions the model reads: its config's `max_position_embeddings`, less the
    positions a table of learnt positions reserves below its first one (RoBERTa's numbering
    starts after the padding index); None when the config states no limit."""
    positions = getattr(model.config, "max_position_embeddings", None)
    if not isinstance(positions, int) or positions < 1:
        return None
    table = getattr(embeddings, "position_embeddings", None)
    if isinstance(table, nn.Embedding) and table.padding_idx is not None:
        return min(positions, table.num_embeddings - table.padding_idx - 1)
    return positions


def load_lm(name_or_path: str, kind: str | None = None, device: str = "cpu") -> KnowledgeLM:
    """Load a built-in name, folder or hub name as a masked or causal LM (inferred if None).

    Architectures with a masked-LM head (BERT, RoBERTa, ...) load as masked LMs, others causal.
    """
    if kind not in (None, "masked", "causal"):
        raise ConfigError(f"unknown language-model kind {kind!r}; choose masked or causal")
    target = torch_device(device)
    source = resolve_model(name_or_path)
    folder = Path(source.location)
    if (
        name_or_path not in BUILTIN_MODELS
        and folder.is_dir()
        and not (folder / "config.json").is_file()
    ):
        raise ModelNotFoundError(
            f"model folder {name_or_path!r} has no config.json; give a folder written by "
            "transformers' save_pretrained, a built-in name or a hub name"
        )
    if kind is None:
        with quiet_transformers(), load_errors(name_or_path, source):
            config = AutoConfig.from_pretrained(
                source.location, local_files_only=source.local_files_only
            )
        kind = "masked" if config.model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES else "causal"
    elif kind == "causal":
        check_causal_lm(name_or_path, "--kind causal")
    lm_kind: LMKind = "masked" if kind == "masked" else "causal"
    loaded = load_model(name_or_path, "masked_lm" if lm_kind == "masked" else "causal_lm")
    model: nn.Module = loaded.model
    model.to(target)
    return wrap_lm(loaded.model, loaded.tokenizer, lm_kind, name_or_path)

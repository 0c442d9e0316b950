"""Causal language modelling needs a decoder: a model whose attention reads only earlier
tokens. An encoder (BERT, RoBERTa, ...) reads text both ways, so as a causal LM it would see
each next token while predicting it, and its perplexities would mean nothing; it is refused
before any work, naming its architecture."""

from __future__ import annotations

from transformers import AutoConfig, PretrainedConfig
from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

from adaptlab.errors import ConfigError
from adaptlab.models.quiet import quiet_transformers
from adaptlab.models.resolve import load_errors, resolve_model


def is_encoder(config: PretrainedConfig) -> bool:
    """Whether the architecture reads text both ways: a masked-LM architecture not set up as a
    decoder (nor as an encoder-decoder, whose decoder is causal)."""
    return (
        config.model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES
        and not getattr(config, "is_encoder_decoder", False)
        and not getattr(config, "is_decoder", False)
        and not getattr(config, "causal", False)  # XLM's causal variants
    )


def check_causal_lm(model: str, objective: str) -> None:
    """Refuse `model` for `objective` when it is an encoder; its config alone is read."""
    source = resolve_model(model)
    with quiet_transformers(), load_errors(model, source):
        config = AutoConfig.from_pretrained(
            source.location, local_files_only=source.local_files_only
        )
    if is_encoder(config):
        architecture = (config.architectures or [config.model_type])[0]
        raise ConfigError(
            f"{model} is a {architecture} ({config.model_type}), an encoder that reads text "
            f"both ways; {objective} predicts each next token from the earlier ones and needs a "
            "decoder-only causal LM (smollm2-135m, a Llama, GPT-2 or Qwen model); pick one"
        )

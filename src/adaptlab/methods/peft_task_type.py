"""PEFT's task type of a model (`task_type` in `adapter_config.json`), from its head's class."""

from __future__ import annotations

from torch import nn

_SUFFIXES = {
    "ForSequenceClassification": "SEQ_CLS",
    "ForTokenClassification": "TOKEN_CLS",
    "ForCausalLM": "CAUSAL_LM",
    "ForConditionalGeneration": "SEQ_2_SEQ_LM",
}


def peft_task_type(model: nn.Module) -> str | None:
    """PEFT's task type of `model`'s head: by its class's suffix, or for the classes named
    otherwise (GPT2LMHeadModel) by the transformers auto class that lists it."""
    from transformers.models.auto import modeling_auto as auto

    name = type(model).__name__
    found = next((t for suffix, t in _SUFFIXES.items() if name.endswith(suffix)), None)
    if found is not None:
        return found
    heads = {
        "CAUSAL_LM": auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        "SEQ_2_SEQ_LM": auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    }
    return next((t for t, classes in heads.items() if name in classes.values()), None)

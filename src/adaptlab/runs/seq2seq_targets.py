"""The target tokens of an encoder-decoder (T5, BART): batches of prompts and completions, and
the cross-entropy of the completions' tokens without the full logits.

A batch holds the prompts right-padded (`input_ids`, `attention_mask`: what the encoder reads)
and the completions right-padded with IGNORE_INDEX (`labels`). The decoder reads the labels
shifted right behind its start token (the model's own `prepare_decoder_input_ids_from_labels`,
what its forward does when given labels), and what its LM head reads at each position is scored
against the label at that same position, chunked (`adaptlab.engine.lm_loss`). A bias the model
adds to the logits after its head (BART's `final_logits_bias`) joins the head's bias, so the
mean is the model's own `outputs.loss`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.engine.lm_head_capture import lm_head_input
from adaptlab.engine.lm_loss import TokenLoss, linear_cross_entropy
from adaptlab.engine.objective import TensorBatch
from adaptlab.engine.packing import Encoded, pad_right
from adaptlab.errors import ConfigError, DataError


def is_encoder_decoder(model: nn.Module) -> bool:
    """Whether `model` reads its input in an encoder and writes in a decoder (T5, BART)."""
    return bool(getattr(getattr(model, "config", None), "is_encoder_decoder", False))


def collate_seq2seq(examples: Sequence[Encoded], pad_id: int) -> TensorBatch:
    """One example a row: the prompts right-padded with `pad_id` and their `attention_mask`,
    the completions' `labels` right-padded with IGNORE_INDEX."""
    if not examples or not all(e.input_ids and e.labels for e in examples):
        raise DataError("a batch needs at least one example, each with a prompt and a completion")
    return {
        "input_ids": pad_right([e.input_ids for e in examples], pad_id),
        "attention_mask": pad_right([[1] * len(e.input_ids) for e in examples], 0),
        "labels": pad_right([e.labels for e in examples], IGNORE_INDEX),
    }


def seq2seq_scores(model: nn.Module, batch: TensorBatch) -> TokenLoss:
    """The cross-entropy of `batch`'s labels (see the module docstring)."""
    prepare = getattr(model, "prepare_decoder_input_ids_from_labels", None)
    if not callable(prepare):
        raise ConfigError(
            f"{type(model).__name__} makes no decoder inputs from labels "
            "(prepare_decoder_input_ids_from_labels); pick a sequence-to-sequence LM"
        )
    labels = batch["labels"]
    _check_window(model, max(batch["input_ids"].shape[1], labels.shape[1]))
    inputs = {key: value for key, value in batch.items() if key != "labels"}
    head = lm_head_input(model, **inputs, decoder_input_ids=prepare(labels=labels), use_cache=False)
    kept = labels.ne(IGNORE_INDEX)
    bias = _logits_bias(model, head.bias, head.weight.shape[0])
    return linear_cross_entropy(head.hidden[kept], head.weight, bias, labels[kept])


def target_count(batch: TensorBatch) -> int:
    """The target tokens `seq2seq_scores` averages over: every label not IGNORE_INDEX."""
    return int(batch["labels"].ne(IGNORE_INDEX).sum())


def check_windows(model: nn.Module, max_length: int, new_tokens: int) -> None:
    """Refuse, before any work, an encoder-decoder whose positions (BART's learned ones; T5's
    relative ones have no end) hold fewer than `max_length` tokens of prompt or completion, or
    than the decoder's start token and `new_tokens` generated ones; a decoder passes."""
    window = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if not is_encoder_decoder(model) or not isinstance(window, int):
        return
    name = type(model).__name__
    if max_length > window:
        raise ConfigError(
            f"--max-length {max_length} is past the {window} positions of {name}; pick at most "
            f"{window}"
        )
    if new_tokens + 1 > window:
        raise ConfigError(
            f"--max-new-tokens {new_tokens} and the decoder's start token are past the {window} "
            f"positions of {name}; pick at most {window - 1}"
        )


def _check_window(model: nn.Module, length: int) -> None:
    """Refuse a prompt or completion longer than the model's positions (BART's learned ones;
    T5's relative positions have no end)."""
    window = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(window, int) and length > window:
        raise DataError(
            f"a prompt or completion of {length} tokens is past the {window} positions of "
            f"{type(model).__name__}; lower --max-length to {window}"
        )


def _logits_bias(model: nn.Module, bias: torch.Tensor | None, words: int) -> torch.Tensor | None:
    """The head's bias with the model's `final_logits_bias` (BART, Marian, Pegasus) added."""
    extra = getattr(model, "final_logits_bias", None)
    if not isinstance(extra, torch.Tensor):
        return bias
    if extra.numel() != words:
        raise ConfigError(
            f"{type(model).__name__}: final_logits_bias has {extra.numel()} values for "
            f"{words} words; use the config.json saved with these weights"
        )
    extra = extra.reshape(words)
    return extra if bias is None else bias + extra

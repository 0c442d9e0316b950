"""Answers to many prompts from an encoder-decoder (T5, BART), decoded greedily in batches by
transformers' `generate`. The engine `adaptlab serve` generates with (`adaptlab.engine.generate`)
runs decoder-only models, whose prompt and answer are one growing sequence; an encoder-decoder
reads its prompt once, in its encoder, and its decoder starts from its own start token.

At most `batch_size` prompts decode together, right-padded (the encoder reads the padding
mask), with `do_sample=False, num_beams=1` and `max_new_tokens`; the rest of the model's
generation config (a forced first token, a minimum length) applies as in `model.generate`.
The model generates as it is, with whatever adapter is active on it. A text is what the decoder
wrote after its start token up to the first end-of-text token (`engine.generation.end_ids`),
decoded without special tokens, and cut before the first stop string it holds, as the server
cuts it (`engine.sampling.StopText`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from adaptlab.checks import positive, shown
from adaptlab.engine.generation import end_ids
from adaptlab.engine.packing import pad_right
from adaptlab.engine.sampling import StopText
from adaptlab.errors import ConfigError, DataError
from adaptlab.progress import Progress


def generate_seq2seq(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    stop: Sequence[str] = (),
    batch_size: int = 16,
    progress: Progress | None = None,
) -> list[str]:
    """The greedy answer of the encoder-decoder `model` to each prompt (the encoder's token
    ids), in prompt order; `progress` counts the prompts as they finish. The model runs in
    eval mode and is left in the mode it was in."""
    positive(max_new_tokens, "max_new_tokens")
    positive(batch_size, "batch_size")
    if isinstance(stop, str):
        raise ConfigError(f"stop must be a list of strings, got the string {shown(stop)}")
    checked = _check_model(model)
    _check_prompts(checked, prompts, max_new_tokens)
    pad_id = _pad_id(checked, tokenizer)
    ends = end_ids(checked, tokenizer)
    device = next(checked.parameters()).device
    texts: list[str] = []
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(prompts), batch_size):
            part = prompts[start : start + batch_size]
            with torch.no_grad():
                out = checked.generate(  # type: ignore[operator]
                    **_padded(part, pad_id, device),
                    do_sample=False,
                    num_beams=1,
                    max_new_tokens=max_new_tokens,
                )
            texts += [_text(tokenizer, row[1:], ends, stop) for row in out.tolist()]
            if progress is not None:
                progress.update(len(part))
    finally:
        model.train(was_training)
    return texts


def _text(
    tokenizer: PreTrainedTokenizerBase,
    tokens: Sequence[int],
    ends: frozenset[int],
    stop: Sequence[str],
) -> str:
    """The text of `tokens` up to the first end-of-text token, cut at the first stop string."""
    end = next((i for i, token in enumerate(tokens) if token in ends), len(tokens))
    cut = StopText(stop)
    cut.update(str(tokenizer.decode(list(tokens[:end]), skip_special_tokens=True)))
    return cut.text


def _padded(
    prompts: Sequence[Sequence[int]], pad_id: int, device: torch.device
) -> dict[str, torch.Tensor]:
    """`prompts` right-padded with `pad_id`, and their attention mask, on `device`."""
    return {
        "input_ids": pad_right(prompts, pad_id).to(device),
        "attention_mask": pad_right([[1] * len(prompt) for prompt in prompts], 0).to(device),
    }


def _pad_id(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> int:
    """The id prompts are padded with: the tokenizer's, else the model's config's."""
    pad = tokenizer.pad_token_id
    if pad is None:
        pad = getattr(model.config, "pad_token_id", None)
    if not isinstance(pad, int):
        raise ConfigError(
            f"tokenizer {type(tokenizer).__name__} has no pad token to batch prompts with; set "
            "tokenizer.pad_token"
        )
    return pad


def _check_model(model: nn.Module) -> PreTrainedModel:
    """`model` if it is an encoder-decoder of transformers that generates, else a ConfigError."""
    name = type(model).__name__
    if not isinstance(model, PreTrainedModel) or not model.can_generate():
        raise ConfigError(
            f"{name} has no language-model head and cannot generate text; load the model as a "
            "sequence-to-sequence LM"
        )
    if not getattr(model.config, "is_encoder_decoder", False):
        raise ConfigError(
            f"{name} is not an encoder-decoder; generate_seq2seq decodes encoder-decoders "
            "(adaptlab.engine.generate.generate_batch decodes decoder-only models)"
        )
    return model


def _check_prompts(
    model: PreTrainedModel, prompts: Sequence[Sequence[int]], new_tokens: int
) -> None:
    """Refuse an empty prompt, a token id outside the vocabulary, a prompt longer than the
    encoder's window, or more new tokens than the decoder's window holds."""
    embeddings = model.get_input_embeddings()
    vocabulary = embeddings.num_embeddings if isinstance(embeddings, nn.Embedding) else None
    window = getattr(model.config, "max_position_embeddings", None)
    if isinstance(window, int) and new_tokens + 1 > window:
        raise DataError(
            f"{new_tokens} new tokens are asked and the decoder's window is {window} positions "
            "(its start token included); ask fewer new tokens"
        )
    for index, prompt in enumerate(prompts):
        if len(prompt) == 0:
            raise DataError(f"prompt {index} has no tokens; the encoder reads at least one")
        if vocabulary is not None and not 0 <= min(prompt) <= max(prompt) < vocabulary:
            bad = next(t for t in prompt if not 0 <= t < vocabulary)
            raise DataError(
                f"prompt {index} holds token id {shown(bad)}, outside the model's vocabulary "
                f"of {vocabulary}; encode prompts with the model's own tokenizer"
            )
        if isinstance(window, int) and len(prompt) > window:
            raise DataError(
                f"prompt {index} has {len(prompt)} tokens, past the encoder's window of "
                f"{window}; shorten the prompts (--max-length)"
            )

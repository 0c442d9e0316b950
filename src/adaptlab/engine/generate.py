"""Answers to many prompts for evaluation, decoded in batches by the engine `adaptlab serve`
generates with (`adaptlab.engine.generation.TextGenerator`), driven on the calling thread.

The model generates as it is, with whatever adapter is active on it: every prompt runs on the
one model, which nothing activates or swaps. At most `batch_size` sequences decode together;
a sequence leaves as soon as it ends and the next prompt takes its place. Greedy by default,
which picks what `model.generate(do_sample=False)` picks; above temperature 0 tokens are
drawn, prompt `i` with its own generator seeded `seed + i`, so a seed gives the same texts
again. A text ends at the model's end-of-text token, before the first stop string it
completes (cut as the server cuts it), or after `max_new_tokens` tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from adaptlab.checks import positive, shown
from adaptlab.checks import seed as checked_seed
from adaptlab.engine.generation import (
    Completion,
    Emit,
    Event,
    Failure,
    Finish,
    Piece,
    Seat,
    TextGenerator,
)
from adaptlab.engine.sampling import Sampling
from adaptlab.errors import ConfigError, DataError
from adaptlab.progress import Progress


def generate_batch(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    stop: Sequence[str] = (),
    temperature: float = 0.0,
    seed: int = 0,
    top_p: float = 1.0,
    batch_size: int = 16,
    progress: Progress | None = None,
) -> list[str]:
    """The text `model` generates after each prompt (token ids), in prompt order; `progress`
    counts the prompts as they finish. The model runs in eval mode and is left in the mode
    it was in."""
    positive(max_new_tokens, "max_new_tokens")
    positive(batch_size, "batch_size")
    checked_seed(seed)
    _check_sampling(temperature, top_p, stop)
    _check_prompts(_check_model(model), prompts, max_new_tokens)
    answers = _Answers(len(prompts), progress)
    requests = [
        Completion(
            None,
            list(prompt),
            Sampling(max_new_tokens, temperature, top_p, tuple(stop), seed + index),
            answers.receiver(index),
        )
        for index, prompt in enumerate(prompts)
    ]
    decode(model, tokenizer, requests, max_rows=batch_size, check=answers.raise_failure)
    return answers.texts()


def decode(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    requests: Sequence[Completion],
    *,
    max_rows: int,
    check: Callable[[], None],
) -> None:
    """Decode every request with `model` as it is (no adapter activated or swapped), at most
    `max_rows` sequences together, in eval mode (the model's mode restored after); `check`
    runs after each step (to raise a failure its receivers kept)."""
    seat = Seat(model, adapter=None, shares_rows=False, fixed=True)
    generator = TextGenerator(tokenizer, lambda *_: seat, max_rows=max_rows, wake=lambda: None)
    for request in requests:
        generator.submit(request)
    was_training = model.training
    model.eval()
    try:
        while generator.busy():
            generator.step()
            check()
    finally:
        model.train(was_training)


class _Answers:
    """The text of each prompt as its pieces come, and the first failure."""

    def __init__(self, count: int, progress: Progress | None) -> None:
        self._pieces: list[list[str]] = [[] for _ in range(count)]
        self._progress = progress
        self._failure: BaseException | None = None

    def receiver(self, index: int) -> Emit:
        """Where prompt `index`'s events go."""

        def receive(event: Event) -> None:
            if isinstance(event, Piece):
                self._pieces[index].append(event.text)
            elif isinstance(event, Failure):
                self._failure = self._failure or event.error
            elif isinstance(event, Finish) and self._progress is not None:
                self._progress.update()

        return receive

    def raise_failure(self) -> None:
        """Raise what stopped a prompt's decoding, if anything did."""
        if self._failure is not None:
            raise self._failure

    def texts(self) -> list[str]:
        return ["".join(pieces) for pieces in self._pieces]


def _check_sampling(temperature: float, top_p: float, stop: Sequence[str]) -> None:
    """Refuse a temperature below 0, a top_p outside (0, 1], an empty stop string."""
    if not isinstance(temperature, int | float) or not 0 <= temperature < math.inf:
        raise ConfigError(f"temperature must be a finite number >= 0, got {shown(temperature)}")
    if not isinstance(top_p, int | float) or not 0 < top_p <= 1:
        raise ConfigError(f"top_p must be a number in (0, 1], got {shown(top_p)}")
    if isinstance(stop, str):
        raise ConfigError(f"stop must be a list of strings, got the string {shown(stop)}")
    for text in stop:
        if not isinstance(text, str) or not text:
            raise ConfigError(f"stop strings must be non-empty strings, got {shown(text)}")


def _check_model(model: nn.Module) -> PreTrainedModel:
    """`model` if it is a decoder-only language model of transformers, else a ConfigError."""
    name = type(model).__name__
    if not isinstance(model, PreTrainedModel) or not model.can_generate():
        raise ConfigError(
            f"{name} has no language-model head and cannot generate text; load the model as a "
            "causal LM"
        )
    if model.config.is_encoder_decoder:
        raise ConfigError(
            f"{name} is an encoder-decoder; generate_batch decodes decoder-only causal LMs"
        )
    return model


def _check_prompts(
    model: PreTrainedModel, prompts: Sequence[Sequence[int]], new_tokens: int
) -> None:
    """Refuse an empty prompt, a token id outside the vocabulary, or a prompt that leaves no
    room in the model's window for `new_tokens` more."""
    embeddings = model.get_input_embeddings()
    vocabulary = embeddings.num_embeddings if isinstance(embeddings, nn.Embedding) else None
    window = getattr(model.config, "max_position_embeddings", None)
    for index, prompt in enumerate(prompts):
        if len(prompt) == 0:
            raise DataError(f"prompt {index} has no tokens; generation starts from at least one")
        if vocabulary is not None and not 0 <= min(prompt) <= max(prompt) < vocabulary:
            bad = next(t for t in prompt if not 0 <= t < vocabulary)
            raise DataError(
                f"prompt {index} holds token id {shown(bad)}, outside the model's vocabulary "
                f"of {vocabulary}; encode prompts with the model's own tokenizer"
            )
        if isinstance(window, int) and len(prompt) + new_tokens > window:
            raise DataError(
                f"prompt {index} has {len(prompt)} tokens and {new_tokens} new tokens are asked: "
                f"{len(prompt) + new_tokens}, past the model's window of {window}; shorten the "
                "prompts or ask fewer new tokens"
            )

"""How a completion picks its tokens and where its text stops.

Temperature 0 is greedy (the most likely token, as `model.generate(do_sample=False)`); above
0 the logits are divided by the temperature and, with `top_p` < 1, cut to the smallest set of
most likely tokens whose probabilities reach `top_p` (nucleus sampling, Holtzman et al. 2020,
§3.1), then one is drawn with the request's own generator (seeded by `seed` when given, so a
seeded request draws the same tokens again). Text stops before the first `stop` string.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

REPLACEMENT = "\ufffd"
"""What a tokenizer decodes an incomplete UTF-8 character to: held back until it completes."""


@dataclass(frozen=True)
class Sampling:
    """A request's sampling options, already checked against the server's limits."""

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def generator(self) -> torch.Generator:
        """The random source of one request: `seed`'s, or a fresh one."""
        seed = self.seed if self.seed is not None else random.getrandbits(63)
        return torch.Generator().manual_seed(seed)


def pick(
    logits: torch.Tensor, options: Sequence[Sampling], generators: Sequence[torch.Generator]
) -> list[int]:
    """One token per row of `logits` (rows, vocabulary), each by its row's options."""
    chosen = logits.argmax(dim=-1).tolist()
    for row, (sampling, generator) in enumerate(zip(options, generators, strict=True)):
        if not sampling.greedy:
            chosen[row] = _draw(logits[row].float(), sampling, generator)
    return chosen


def _draw(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator) -> int:
    probabilities = torch.softmax(logits / sampling.temperature, dim=-1)
    if sampling.top_p < 1:
        ordered, order = probabilities.sort(descending=True)
        before = ordered.cumsum(dim=-1) - ordered  # mass of the tokens more likely than each
        ordered[before >= sampling.top_p] = 0  # keeps the first token that reaches top_p
        probabilities = torch.zeros_like(probabilities).scatter(0, order, ordered)
    return int(torch.multinomial(probabilities.cpu(), 1, generator=generator))


class StopText:
    """The text of a completion as its tokens come: what may be sent so far, and where the
    first stop string cuts it.

    A tail that could still become a stop string, or an incomplete character, is held back
    until the next token settles it, so streamed text never shows what a stop removes.
    """

    def __init__(self, stop: Sequence[str]) -> None:
        self.stop = tuple(stop)
        self.text = ""
        self.sent = 0
        self.stopped = False

    def update(self, text: str) -> None:
        """The whole completion's text now; cut at the first stop string in it."""
        found = [i for i in (text.find(s) for s in self.stop) if i >= 0]
        if found:
            text, self.stopped = text[: min(found)], True
        self.text = text

    def fresh(self, final: bool) -> str:
        """Text not sent yet that is safe to send (all of it when `final`)."""
        end = len(self.text) if final or self.stopped else self._safe_end()
        piece = self.text[self.sent : end] if end > self.sent else ""
        self.sent = max(self.sent, end)
        return piece

    def _safe_end(self) -> int:
        text = self.text.rstrip(REPLACEMENT)
        held = max(
            (n for s in self.stop for n in range(1, len(s)) if text.endswith(s[:n])), default=0
        )
        return len(text) - held

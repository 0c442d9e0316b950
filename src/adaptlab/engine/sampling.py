"""How a completion picks its tokens and where its text stops.

Temperature 0 is greedy (the most likely token, as `model.generate(do_sample=False)`); above
0 the logits are divided by the temperature and, with `top_p` < 1, cut to the smallest set of
most likely tokens whose probabilities reach `top_p` (nucleus sampling, Holtzman et al. 2020,
§3.1), then one is drawn with the request's own generator (seeded by `seed` when given, so a
seeded request draws the same tokens again). A temperature near 0 picks what greedy decoding
picks. Text stops before the first `stop` string it completes.
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
            chosen[row] = _draw(logits[row], sampling, generator)
    return chosen


def _draw(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator) -> int:
    """A token drawn from the row's distribution at its temperature, cut to its `top_p`.

    The logits are taken from their largest in float64, so a temperature too small for
    float32 (1e-45, 1e-300) leaves the most likely token(s) alone, as greedy decoding does,
    instead of overflowing; the most likely token is always kept, however small `top_p` is.
    """
    shifted = logits.double() - logits.max().double()
    probabilities = torch.softmax(shifted / sampling.temperature, dim=-1)
    if sampling.top_p < 1:
        ordered, order = probabilities.sort(descending=True)
        before = ordered.cumsum(dim=-1) - ordered  # mass of the tokens more likely than each
        cut = before >= sampling.top_p  # keeps the first token that reaches top_p
        cut[0] = False
        ordered[cut] = 0
        probabilities = torch.zeros_like(probabilities).scatter(0, order, ordered)
    return int(torch.multinomial(probabilities.cpu(), 1, generator=generator))


class StopText:
    """The text of a completion as its tokens come: what may be sent so far, and where the
    first stop string cuts it.

    A tail that could still become a stop string, or an incomplete character, is held back
    until the next token settles it, so streamed text never shows what a stop removes. Each
    stop string is matched a character at a time (`_StopMatcher`), so a step reads only the
    characters that are new, however long the text or the stop strings; text that decodes
    differently behind its end (rare) is read again from its start.
    """

    def __init__(self, stop: Sequence[str]) -> None:
        self.stop = tuple(stop)
        self.text = ""
        self.sent = 0
        self.stopped = False
        self._matchers = [_StopMatcher(s) for s in self.stop]
        self._read = 0  # characters of `text` the matchers have read

    def update(self, text: str) -> None:
        """The whole completion's text now; cut before the first stop string it completes."""
        if not text.startswith(self.text[: self._read]):
            self._read = 0
            for matcher in self._matchers:
                matcher.matched = 0
        end = len(text)
        while end > self._read and text[end - 1] == REPLACEMENT:  # an incomplete character
            end -= 1
        if self._matchers:
            for index in range(self._read, end):
                starts = [index + 1 - len(m.stop) for m in self._matchers if m.read(text[index])]
                if starts:
                    self.text, self.stopped = text[: min(starts)], True
                    return
        self.text, self._read = text, end

    def fresh(self, final: bool) -> str:
        """Text not sent yet that is safe to send (all of it when `final`)."""
        end = len(self.text) if final or self.stopped else self._safe_end()
        piece = self.text[self.sent : end] if end > self.sent else ""
        self.sent = max(self.sent, end)
        return piece

    def _safe_end(self) -> int:
        """Where the text that cannot become part of a stop string ends."""
        return self._read - max((m.matched for m in self._matchers), default=0)


class _StopMatcher:
    """One stop string against a text read a character at a time (Knuth, Morris and Pratt
    1977): `matched` is the length of the longest start of the stop string that the text
    read so far ends with."""

    def __init__(self, stop: str) -> None:
        self.stop = stop
        self.matched = 0
        self._fallback = _borders(stop)

    def read(self, char: str) -> bool:
        """Read one more character; whether the text now ends with the whole stop string."""
        stop, matched = self.stop, self.matched
        while matched and stop[matched] != char:
            matched = self._fallback[matched - 1]
        if stop[matched] == char:
            matched += 1
        if matched == len(stop):
            self.matched = self._fallback[matched - 1]
            return True
        self.matched = matched
        return False


def _borders(word: str) -> list[int]:
    """For each start `word[:i + 1]`, the length of its longest proper start that is also
    its end (the Knuth-Morris-Pratt failure function)."""
    borders = [0] * len(word)
    length = 0
    for index in range(1, len(word)):
        while length and word[index] != word[length]:
            length = borders[length - 1]
        if word[index] == word[length]:
            length += 1
        borders[index] = length
    return borders

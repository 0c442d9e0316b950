"""Groups of sampled completions for on-policy training (GRPO): each prompt's `group` completions
drawn by the engine `adaptlab serve` generates with (`adaptlab.engine.generation.TextGenerator`,
driven on the calling thread as `adaptlab.engine.generate.generate_batch` drives it), with the
model as it is (whatever adapter is active), in eval mode and with no gradient.

Completion k of the list (prompt k // group) draws its tokens with its own generator seeded
`seed + k` (`adaptlab.engine.sampling`), so a seed gives the same completions again, whatever
else runs. Each comes back as its text (cut before a stop string, as the server cuts it), the
token ids it drew (the end-of-text token that ended it included; every token drawn where a stop
string ended it, the one that completed the stop string too), and whether it ended (the end of
text or a stop string) or was cut at `max_new_tokens`. A trainer reads the ids, not the text:
tokenising the text again need not give back the tokens drawn (two tokens the tokenizer writes
as one, a special token that decodes to no text)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.checks import positive
from adaptlab.engine.generate import decode
from adaptlab.engine.generation import Completion, Emit, Event, Failure, Finish, Piece
from adaptlab.engine.sampling import Sampling


@dataclass(frozen=True)
class Sampled:
    """One completion: its text, whether it ended by itself, how many tokens it drew (the end
    of text left out), and the ids of every token drawn (the end of text included)."""

    text: str
    ended: bool
    tokens: int
    ids: tuple[int, ...]


def sample_groups(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[Sequence[int]],
    *,
    group: int,
    max_new_tokens: int,
    temperature: float,
    seed: int,
    stop: Sequence[str] = (),
    top_p: float = 1.0,
    max_rows: int | None = None,
) -> list[Sampled]:
    """`group` completions of each prompt (token ids), prompt-major: completion k answers prompt
    k // group. At most `max_rows` sequences decode together (default: all of them). The model
    is left in the mode it was in."""
    positive(group, "group")
    positive(max_new_tokens, "max_new_tokens")
    total = len(prompts) * group
    rows = positive(max_rows, "max_rows") if max_rows is not None else max(total, 1)
    received = _Received(total)
    requests = [
        Completion(
            None,
            list(prompts[index // group]),
            Sampling(max_new_tokens, temperature, top_p, tuple(stop), seed + index),
            received.receiver(index),
        )
        for index in range(total)
    ]
    decode(model, tokenizer, requests, max_rows=rows, check=received.raise_failure)
    return received.samples()


class _Received:
    """Each completion's text as its pieces come, how it finished, and the first failure."""

    def __init__(self, count: int) -> None:
        self._pieces: list[list[str]] = [[] for _ in range(count)]
        self._finish: list[Finish | None] = [None] * count
        self._failure: BaseException | None = None

    def receiver(self, index: int) -> Emit:
        def receive(event: Event) -> None:
            if isinstance(event, Piece):
                self._pieces[index].append(event.text)
            elif isinstance(event, Finish):
                self._finish[index] = event
            elif isinstance(event, Failure):
                self._failure = self._failure or event.error

        return receive

    def raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def samples(self) -> list[Sampled]:
        made = []
        for pieces, finish in zip(self._pieces, self._finish, strict=True):
            assert finish is not None, "a completion ended without finishing"
            ended = finish.reason == "stop"
            made.append(Sampled("".join(pieces), ended, finish.completion_tokens, finish.token_ids))
        return made

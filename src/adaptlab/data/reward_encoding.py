"""Preference pairs as a reward model reads them: each answer with its prompt as one text to
score, tokenised as TRL 1.16's `RewardTrainer` tokenises prompt / chosen / rejected data. A text
prompt and its answer are joined and the tokenizer's EOS text appended (unless the text ends
with it; a tokenizer without one, an encoder's, appends nothing), then tokenised whole with the
tokenizer's special tokens; a conversation's turns and the answer as the assistant's turn are
rendered by the chat template (`adaptlab.data.chat_render`) and tokenised as
`apply_chat_template` tokenises them, with no EOS added. A pair either of whose texts is over
`max_length` tokens is left out (None), as TRL filters it: a score read from a cut text would
not be the text's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from adaptlab.data.chat_render import ChatRenderer, ChatTemplate
from adaptlab.data.encoding import checked_length
from adaptlab.data.generative import Turn, check_conversation
from adaptlab.data.preference import Preference, Prompt

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class ScoredPair:
    """A pair's two texts as token ids: prompt + chosen answer, prompt + rejected answer."""

    chosen: tuple[int, ...]
    rejected: tuple[int, ...]


def with_eos(text: str, eos_token: str | None) -> str:
    """`text` ending with `eos_token` (appended unless it ends with it already), as TRL's
    `RewardTrainer` ends a text answer; unchanged when there is no EOS token."""
    if not eos_token or text.endswith(eos_token):
        return text
    return text + eos_token


class RewardEncoder:
    """Encodes preference pairs for a reward model (see the module docstring); conversations
    are rendered with `chat_template` (None: the tokenizer's own)."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        max_length: int,
        *,
        chat_template: ChatTemplate | None = None,
    ) -> None:
        self.tokenizer, self.max_length = tokenizer, checked_length(tokenizer, max_length)
        self.chat_template = chat_template
        self._renderer: ChatRenderer | None = None  # made at the first conversation

    def pair(self, example: Preference) -> ScoredPair | None:
        """Both texts' ids; None when either is over `max_length` tokens."""
        chosen = self.text_ids(example.prompt, example.chosen)
        rejected = self.text_ids(example.prompt, example.rejected)
        if max(len(chosen), len(rejected)) > self.max_length:
            return None
        return ScoredPair(chosen, rejected)

    def text_ids(self, prompt: Prompt, answer: str) -> tuple[int, ...]:
        """The ids of `prompt` answered by `answer`, whatever their length."""
        if isinstance(prompt, str):
            text = with_eos(prompt + answer, self.tokenizer.eos_token)
            return tuple(self.tokenizer(text, verbose=False)["input_ids"])
        turns = (*prompt, Turn("assistant", answer))
        check_conversation(turns, "a preference pair's conversation")
        renderer = self.renderer()
        return tuple(renderer.ids(renderer.text(turns)))

    def renderer(self) -> ChatRenderer:
        """What renders conversations (a tokenizer without a chat template is refused here,
        at the first conversation, not for text pairs)."""
        if self._renderer is None:
            self._renderer = ChatRenderer(
                self.tokenizer, self.chat_template, window=self.max_length
            )
        return self._renderer

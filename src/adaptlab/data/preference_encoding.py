"""Preference-family examples as a decoder reads them. Each answer is encoded with its prompt as
`sft` and `chat` encode a pair or a chat (`adaptlab.data.generative_encoding`), which is how
TRL 1.16's `DPOTrainer` tokenises them: the prompt and prompt + answer (EOS appended to a text
answer) tokenised apart, the answer starting where the two part; a conversation rendered by the
chat template, the prompt with the assistant's turn opened. Only the answer's tokens are
targets. A sequence over `max_length` loses its prompt's start, never its answer; a pair one of
whose answers does not fit is left out (None)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from adaptlab.data.chat_render import ChatTemplate
from adaptlab.data.generative import Conversation, GenerativeExample, PromptCompletion, Turn
from adaptlab.data.generative_encoding import EncodedExample, GenerativeEncoder
from adaptlab.data.preference import Judged, Preference, Prompt

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class EncodedPair:
    """A preference pair encoded: prompt + chosen and prompt + rejected, targets on the answer."""

    chosen: EncodedExample
    rejected: EncodedExample


@dataclass(frozen=True)
class EncodedJudged:
    """An unpaired answer encoded, and whether it is desirable."""

    answer: EncodedExample
    desirable: bool


def answered(prompt: Prompt, answer: str) -> GenerativeExample:
    """`prompt` answered by `answer`: a pair, or the conversation with the assistant's turn."""
    if isinstance(prompt, str):
        return PromptCompletion(prompt, answer)
    return Conversation((*prompt, Turn("assistant", answer)))


class PreferenceEncoder:
    """Encodes preference pairs, unpaired answers and prompts (see the module docstring)."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        max_length: int,
        *,
        chat_template: ChatTemplate | None = None,
    ) -> None:
        self.answers = GenerativeEncoder(
            tokenizer, max_length, chat_template=chat_template, last_answer_only=True
        )

    def pair(self, example: Preference) -> EncodedPair | None:
        """Both answers encoded with the prompt; None when either does not fit."""
        chosen = self.answers.encode(answered(example.prompt, example.chosen))
        rejected = self.answers.encode(answered(example.prompt, example.rejected))
        if chosen is None or rejected is None:
            return None
        return EncodedPair(chosen, rejected)

    def judged(self, example: Judged) -> EncodedJudged | None:
        """The answer encoded with its prompt; None when it does not fit."""
        answer = self.answers.encode(answered(example.prompt, example.completion))
        return None if answer is None else EncodedJudged(answer, example.desirable)

    def prompt_ids(self, prompt: Prompt, answer: str) -> list[int]:
        """What generation starts from for `prompt` (`GenerativeEncoder.prompt_ids`); `answer`
        is one of its answers (a text prompt's tokens are those before the answer's)."""
        return self.answers.prompt_ids(answered(prompt, answer))

"""Token ids and loss labels of generative examples (labels IGNORE_INDEX off-target).

Decoder-only models (`GenerativeEncoder`):

- A prompt and completion are tokenised as TRL's `SFTTrainer` tokenises them (TRL 1.16): the
  tokenizer's EOS text is appended to the completion (unless it ends with it already), the
  prompt and prompt + completion are tokenised with the tokenizer's special tokens, and the
  completion starts where the two token lists part. Its tokens are the targets, so the labels
  mark the same positions as TRL's completion-only mask.
- A conversation is rendered by the chat template (`adaptlab.data.chat_render`); every
  assistant turn's tokens are targets, the other turns' are not. Only the turns that reach
  the `max_length` tokens kept are looked for, so a long chat costs what is kept of it.
- `train_on_prompt` makes every token a target; `last_answer_only` makes a chat's last
  assistant turn its only target (an answer compared with another, as preference tuning does).

Labels sit at their token's position (`labels[i]` is `input_ids[i]` or IGNORE_INDEX); the loss
shifts them. A sequence longer than `max_length` loses its earliest tokens (the prompt's start,
or a chat's earliest turns); the answer (the completion, or a chat's last assistant turn and
what follows it) is never cut: when it does not fit with at least one token before it (or
has none before it at all: an empty prompt, with a tokenizer that adds no BOS), `encode`
returns None and `encode_split` counts the example in `dropped`.

Encoder-decoder models (`Seq2SeqEncoder`): the input is the prompt's ids (cut from the left to
`max_length`), the labels the completion's ids and EOS (an example whose labels exceed
`max_length` is dropped).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from adaptlab.checks import shown
from adaptlab.data.chat_render import ChatRenderer, ChatTemplate
from adaptlab.data.encoding import IGNORE_INDEX, checked_length
from adaptlab.data.generative import (
    Conversation,
    GenerativeExample,
    PromptCompletion,
    check_conversation,
)
from adaptlab.errors import ConfigError, DataError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class EncodedExample:
    """An example as a model reads it: token ids, and labels (IGNORE_INDEX off-target)."""

    input_ids: tuple[int, ...]
    labels: tuple[int, ...]


@dataclass(frozen=True)
class EncodedSplit:
    """A split's encoded examples in order, and how many were dropped (answer too long)."""

    examples: tuple[EncodedExample, ...]
    dropped: int


def common_prefix_length(ids: Sequence[int], other: Sequence[int]) -> int:
    """How many leading tokens `ids` and `other` share."""
    length = 0
    for token, other_token in zip(ids, other, strict=False):
        if token != other_token:
            break
        length += 1
    return length


def reference(example: GenerativeExample) -> str:
    """The answer generation is scored against: the completion, or a conversation's last
    assistant turn."""
    if isinstance(example, PromptCompletion):
        return example.completion
    return example.turns[_last_answer(example)].content


class GenerativeEncoder:
    """Encodes prompt-completion pairs and conversations for a decoder-only model (see the
    module docstring)."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        max_length: int,
        *,
        train_on_prompt: bool = False,
        chat_template: str | ChatTemplate | None = None,
        last_answer_only: bool = False,
    ) -> None:
        self.tokenizer = tokenizer
        self.max_length = checked_length(tokenizer, max_length)
        self.train_on_prompt = train_on_prompt
        self.last_answer_only = last_answer_only
        self.chat_template = (
            ChatTemplate(chat_template) if isinstance(chat_template, str) else chat_template
        )
        self._chat: ChatRenderer | None = None

    def encode(self, example: GenerativeExample) -> EncodedExample | None:
        """The example's ids and labels, or None when its answer does not fit `max_length`."""
        answers: tuple[range, ...]
        if isinstance(example, PromptCompletion):
            ids, answer = self._pair(example)
            answers = (range(answer, len(ids)),)
        else:
            rendered = self.chat.render(_checked(example), kept=self.max_length)
            ids, answers = list(rendered.input_ids), rendered.answers
            answer = answers[-1].start
            if self.last_answer_only:
                answers = answers[-1:]
        if self.train_on_prompt:
            labels = list(ids)
        else:
            labels = [IGNORE_INDEX] * len(ids)
            for span in answers:
                labels[span.start : span.stop] = ids[span.start : span.stop]
        cut = max(0, len(ids) - self.max_length)
        if cut >= answer:
            return None
        return EncodedExample(tuple(ids[cut:]), tuple(labels[cut:]))

    def encode_split(self, examples: Sequence[GenerativeExample]) -> EncodedSplit:
        """Every example encoded, those whose answer does not fit counted as dropped."""
        return _encode_all(self.encode, examples)

    def prompt_ids(self, example: GenerativeExample) -> list[int]:
        """What generation starts from: the prompt's tokens as they begin its training
        sequence, or a conversation up to its last assistant turn with that turn opened; cut
        from the left to `max_length - 1` tokens."""
        if isinstance(example, PromptCompletion):
            ids, answer = self._pair(example)
            prompt = ids[:answer]
            if not prompt:
                raise DataError(
                    f"a prompt ({shown(example.prompt)}) gives no token before its completion "
                    f"with tokenizer {type(self.tokenizer).__name__}, so generation has nothing "
                    "to start from; give every row a prompt"
                )
        else:
            before = example.turns[: _last_answer(example)]
            prompt = self.chat.ids(self.chat.text(before, opened=True))
        return prompt[-(self.max_length - 1) :]

    def reference(self, example: GenerativeExample) -> str:
        """The answer generation is scored against (`reference`)."""
        return reference(example)

    @property
    def chat(self) -> ChatRenderer:
        """The chat renderer, made at the first conversation (a tokenizer without a chat
        template still encodes prompt-completion pairs)."""
        if self._chat is None:
            self._chat = ChatRenderer(self.tokenizer, self.chat_template, window=self.max_length)
        return self._chat

    def _pair(self, example: PromptCompletion) -> tuple[list[int], int]:
        """TRL's prompt + completion + EOS ids, and where the completion starts."""
        eos = self.tokenizer.eos_token
        if not eos:
            raise ConfigError(
                f"tokenizer {type(self.tokenizer).__name__} has no EOS token to end "
                "completions with; set tokenizer.eos_token"
            )
        completion = example.completion
        if not completion.endswith(eos):
            completion += eos
        prompt: list[int] = self.tokenizer(example.prompt)["input_ids"]
        ids: list[int] = self.tokenizer(example.prompt + completion)["input_ids"]
        return ids, common_prefix_length(prompt, ids)


class Seq2SeqEncoder:
    """Encodes prompt-completion pairs for an encoder-decoder model: the prompt's ids in, the
    completion's ids and EOS as labels (see the module docstring)."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, max_length: int) -> None:
        self.tokenizer = tokenizer
        self.max_length = checked_length(tokenizer, max_length)

    def encode(self, example: GenerativeExample) -> EncodedExample | None:
        """The prompt's ids and the completion's labels, or None when they exceed
        `max_length`."""
        pair = _pair_only(example)
        eos = self.tokenizer.eos_token_id
        if eos is None:
            raise ConfigError(
                f"tokenizer {type(self.tokenizer).__name__} has no EOS token to end "
                "completions with; set tokenizer.eos_token"
            )
        labels = [*self.tokenizer(pair.completion, add_special_tokens=False)["input_ids"], eos]
        if len(labels) > self.max_length:
            return None
        return EncodedExample(tuple(self.prompt_ids(pair)), tuple(labels))

    def encode_split(self, examples: Sequence[GenerativeExample]) -> EncodedSplit:
        """Every example encoded, those whose completion does not fit counted as dropped."""
        return _encode_all(self.encode, examples)

    def prompt_ids(self, example: GenerativeExample) -> list[int]:
        """The encoder's input: the prompt's ids with the tokenizer's special tokens, cut from
        the left to `max_length`."""
        ids: list[int] = self.tokenizer(_pair_only(example).prompt)["input_ids"]
        if not ids:
            raise DataError(
                f"a prompt is empty and tokenizer {type(self.tokenizer).__name__} adds no "
                "token to it; give every row a prompt"
            )
        return ids[-self.max_length :]

    def reference(self, example: GenerativeExample) -> str:
        """The answer generation is scored against: the completion."""
        return _pair_only(example).completion


def _encode_all(
    encode: Callable[[GenerativeExample], EncodedExample | None],
    examples: Sequence[GenerativeExample],
) -> EncodedSplit:
    """`encode` applied to every example; the Nones counted as dropped."""
    encoded = [encode(example) for example in examples]
    kept = tuple(item for item in encoded if item is not None)
    return EncodedSplit(kept, len(encoded) - len(kept))


def _checked(example: Conversation) -> Conversation:
    """A conversation adaptlab trains on (`check_conversation`)."""
    check_conversation(example.turns, "a conversation")
    return example


def _last_answer(example: Conversation) -> int:
    """The index of a conversation's last assistant turn."""
    check_conversation(example.turns, "a conversation")
    return max(i for i, turn in enumerate(example.turns) if turn.role == "assistant")


def _pair_only(example: GenerativeExample) -> PromptCompletion:
    """A prompt-completion pair; a conversation is refused."""
    if not isinstance(example, PromptCompletion):
        raise ConfigError(
            "encoder-decoder models read prompt-completion pairs, not chats; give prompt and "
            "completion columns"
        )
    return example

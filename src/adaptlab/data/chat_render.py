"""A conversation rendered by a chat template, and the tokens of each of its assistant turns.

The whole conversation is rendered as `tokenizer.apply_chat_template` renders it and tokenised
as it tokenises it (no special tokens added: the template writes its own). An assistant turn's
tokens are found by rendering the conversation's start: the turn begins where the messages
before it, rendered with the assistant's turn opened (`add_generation_prompt`), part from the
whole text, and ends where the messages up to and including it, rendered alone, end. So any
template works that renders a conversation's start the same whether or not more messages
follow (the end-of-turn marker is inside the turn, and so is whatever the template writes
between it and the next message). Characters map to tokens through the fast tokenizer's
offsets: a token that holds any character of the turn belongs to it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from adaptlab.checks import shown
from adaptlab.data.generative import Conversation, Turn
from adaptlab.errors import ConfigError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class RenderedChat:
    """A conversation's token ids, and the token positions of each assistant turn in order."""

    input_ids: tuple[int, ...]
    answers: tuple[range, ...]


class ChatRenderer:
    """Renders conversations with `chat_template` (None: the tokenizer's own)."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, chat_template: str | None) -> None:
        name = type(tokenizer).__name__
        if chat_template is None and not getattr(tokenizer, "chat_template", None):
            raise ConfigError(
                f"tokenizer {name} has no chat template to render chats with; pass "
                "--chat-template FILE (a Jinja chat template)"
            )
        if not getattr(tokenizer, "is_fast", False):
            raise ConfigError(
                f"chats need a fast tokenizer (to map an assistant turn's characters to its "
                f"tokens); {name} is not one; load it with AutoTokenizer.from_pretrained(..., "
                "use_fast=True)"
            )
        self.tokenizer = tokenizer
        self.chat_template = chat_template

    def text(self, turns: Sequence[Turn], *, opened: bool = False) -> str:
        """`turns` rendered by the template, the assistant's turn opened after them when
        `opened`; whatever a template raises (it is code) is one line."""
        messages = [{"role": turn.role, "content": turn.content} for turn in turns]
        try:
            text = self.tokenizer.apply_chat_template(
                messages,
                chat_template=self.chat_template,
                add_generation_prompt=opened,
                tokenize=False,
            )
        except Exception as error:  # a template is code: whatever it raises is its refusal
            raise ConfigError(
                f"the chat template cannot render a conversation ({shown(str(error))}); pass "
                "--chat-template with one that renders system, user and assistant messages"
            ) from None
        return str(text)

    def ids(self, text: str) -> list[int]:
        """The token ids of rendered text, as `apply_chat_template` tokenises it."""
        ids: list[int] = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return ids

    def render(self, conversation: Conversation) -> RenderedChat:
        """The whole conversation's ids and the tokens of its assistant turns."""
        turns = conversation.turns
        whole = self.text(turns)
        encoded = self.tokenizer(whole, add_special_tokens=False, return_offsets_mapping=True)
        offsets: list[tuple[int, int]] = encoded["offset_mapping"]
        answers = []
        for index, turn in enumerate(turns):
            if turn.role != "assistant":
                continue
            through = self.text(turns[: index + 1])
            if not whole.startswith(through):
                raise ConfigError(
                    f"the chat template renders message {index + 1} (assistant) differently "
                    "when more messages follow, so its tokens cannot be told apart; pass "
                    "--chat-template with a template that renders earlier messages the same "
                    "whatever follows"
                )
            start = len(os.path.commonprefix([self.text(turns[:index], opened=True), whole]))
            tokens = covering(offsets, start, len(through))
            if not tokens:
                raise ConfigError(
                    f"the chat template renders message {index + 1} (assistant) as no tokens; "
                    "pass --chat-template with one that writes the assistant's messages"
                )
            answers.append(tokens)
        return RenderedChat(tuple(encoded["input_ids"]), tuple(answers))


def covering(offsets: Sequence[tuple[int, int]], start: int, end: int) -> range:
    """The tokens from the first to the last whose characters (`offsets`, end excluded) meet
    characters `start` to `end` (end excluded); an empty range when none does."""
    inside = [
        position
        for position, (first, last) in enumerate(offsets)
        if (first < end and last > start) or (first == last and start <= first < end)
    ]
    return range(inside[0], inside[-1] + 1) if inside else range(0)

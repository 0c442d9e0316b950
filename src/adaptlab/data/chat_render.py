"""A conversation rendered by a chat template, and the tokens of its assistant turns.

The whole conversation is rendered as `tokenizer.apply_chat_template` renders it and tokenised
as it tokenises it (no special tokens added: the template writes its own). An assistant turn's
tokens are found by rendering the conversation's start: the turn begins where the messages
before it, rendered with the assistant's turn opened (`add_generation_prompt`), part from the
whole text, and ends where the messages up to and including it, rendered alone, end. So any
template works that renders a conversation's start the same whether or not more messages
follow (the end-of-turn marker is inside the turn, and so is whatever the template writes
between it and the next message). Characters map to tokens through the fast tokenizer's
offsets: a token that holds any character of the turn belongs to it.

Each turn found costs a rendering of the chat up to it, so only the turns that reach the tokens
a model will read are found (`render`'s `kept`): a long chat cut to its last tokens costs a few
renderings, not one per turn. Every error a template causes names where it came from
(`ChatTemplate.origin`: a file, or the folder of the adapter whose manifest keeps it, as several
adapters may be in play) and says what to do about it there (`ChatTemplate.advice`).

A template is code, so each rendering is bounded (`adaptlab.data.template_bounds`, as the
server bounds its renders): stopped past `seconds` (by default the server's default), and
refused when it writes more than `rendered_chars` of the window beyond what the messages hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from adaptlab.checks import shown
from adaptlab.data.generative import Conversation, Turn
from adaptlab.data.template_bounds import (
    RENDER_SECONDS,
    Overran,
    overran,
    overwrote,
    rendered_chars,
    time_bound,
)
from adaptlab.errors import ConfigError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

PASS_FILE = "pass --chat-template FILE with one that"
"""How the advice on a tokenizer's template starts."""


@dataclass(frozen=True)
class ChatTemplate:
    """A Jinja chat template and where it came from, as its errors name it ("the chat template
    <origin> cannot ...") and as their advice fits it (`kind`: passed to the API, read from a
    file or kept in an adapter's manifest)."""

    text: str
    origin: str = "passed as chat_template"
    kind: Literal["passed", "file", "manifest"] = "passed"

    @classmethod
    def from_file(cls, path: Path, text: str) -> ChatTemplate:
        """A template read from file `path` (`--chat-template`, a `chat_template` option)."""
        return cls(text, f"from chat template file {path}", "file")

    @classmethod
    def from_manifest(cls, text: str, folder: str | PathLike[str]) -> ChatTemplate:
        """The template adapter `folder` (an adapter folder, or a run folder holding one) was
        trained with, kept in its manifest."""
        return cls(text, f"from the manifest of adapter {folder}", "manifest")

    def advice(self, needed: str) -> str:
        """What a refusal of this template tells the user to do, `needed` saying what a
        template that works does ("renders within 2 s")."""
        if self.kind == "file":
            return f"fix the file or pass another --chat-template FILE, one that {needed}"
        if self.kind == "manifest":
            return (
                f"the adapter was saved with a broken template: retrain it with one that "
                f"{needed}, or pass --chat-template FILE where the command takes one"
            )
        return f"pass a chat template that {needed}"


def kept_template(manifest: Mapping[str, Any], folder: str | PathLike[str]) -> ChatTemplate | None:
    """The chat template `manifest`, adapter `folder`'s, keeps (None: it keeps none)."""
    text = manifest.get("chat_template")
    return ChatTemplate.from_manifest(text, folder) if text else None


@dataclass(frozen=True)
class RenderedChat:
    """A conversation's token ids, and the token positions of its assistant turns in order
    (every one, or those that reach the tokens kept: see `ChatRenderer.render`)."""

    input_ids: tuple[int, ...]
    answers: tuple[range, ...]


class ChatRenderer:
    """Renders conversations with `template` (None: the tokenizer's own) for a model reading
    `window` tokens, each rendering within `seconds` and writing at most `extra_chars`
    characters beyond its messages' own."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        template: ChatTemplate | None,
        *,
        window: int,
        seconds: float = RENDER_SECONDS,
    ) -> None:
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        if template is None and not getattr(tokenizer, "chat_template", None):
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
        self.template = template
        self.chat_template = None if template is None else template.text
        self.origin = f"of tokenizer {name}" if template is None else template.origin
        self.extra_chars = rendered_chars(window)
        self.seconds = seconds
        self._writes_answers = False

    def text(self, turns: Sequence[Turn], *, opened: bool = False) -> str:
        """`turns` rendered by the template, the assistant's turn opened after them when
        `opened`; whatever a template raises (it is code), a rendering past `seconds` and one
        writing more than `extra_chars` beyond the messages' characters are one line."""
        messages = [{"role": turn.role, "content": turn.content} for turn in turns]
        try:
            with time_bound(self.seconds):
                text = self.tokenizer.apply_chat_template(
                    messages,
                    chat_template=self.chat_template,
                    add_generation_prompt=opened,
                    tokenize=False,
                )
        except Overran:
            raise self.refusal(
                overran(self.seconds), f"renders within {self.seconds:g} s"
            ) from None
        except Exception as error:  # a template is code: whatever it raises is its refusal
            raise self.refusal(
                f"cannot render a conversation ({shown(str(error))})",
                "renders system, user and assistant messages",
            ) from None
        text = str(text)
        limit = self.extra_chars + sum(len(turn.content) for turn in turns)
        if len(text) > limit:
            raise self.refusal(overwrote(len(text)), f"writes at most {limit:,} characters")
        return text

    def ids(self, text: str) -> list[int]:
        """The token ids of rendered text, as `apply_chat_template` tokenises it (no warning
        when they outnumber what the model takes: they are cut to fit)."""
        ids: list[int] = self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        return ids

    def render(self, conversation: Conversation, kept: int | None = None) -> RenderedChat:
        """The conversation's ids and the tokens of its assistant turns: of every one, or
        with `kept`, of those that reach its last `kept` tokens and of its last (whose start
        says whether its answer fits); the earlier ones end before the tokens kept."""
        turns = conversation.turns
        whole = self.text(turns)
        self._check_writes_answers(turns, whole)
        encoded = self.tokenizer(
            whole, add_special_tokens=False, return_offsets_mapping=True, verbose=False
        )
        offsets: list[tuple[int, int]] = encoded["offset_mapping"]
        cut = 0 if kept is None else max(0, len(offsets) - kept)
        answers: list[range] = []
        for index in reversed([i for i, turn in enumerate(turns) if turn.role == "assistant"]):
            answers.append(self._answer(turns, index, whole, offsets))
            if answers[-1].start < cut:
                break
        return RenderedChat(tuple(encoded["input_ids"]), tuple(reversed(answers)))

    def refusal(self, problem: str, needed: str) -> ConfigError:
        """The one-line error of a template that `problem`, naming where it came from, with
        advice that fits it on one that `needed`."""
        template = self.template
        advice = f"{PASS_FILE} {needed}" if template is None else template.advice(needed)
        return ConfigError(f"the chat template {self.origin} {problem}; {advice}")

    def _answer(
        self, turns: Sequence[Turn], index: int, whole: str, offsets: Sequence[tuple[int, int]]
    ) -> range:
        """The tokens of assistant turn `index` in `whole`, the rendered conversation."""
        through = self.text(turns[: index + 1])
        if not whole.startswith(through):
            raise self.refusal(
                f"renders message {index + 1} (assistant) differently when more messages "
                "follow, so its tokens cannot be told apart",
                "renders earlier messages the same whatever follows",
            )
        start = shared_prefix(self.text(turns[:index], opened=True), whole)
        tokens = covering(offsets, start, len(through))
        if not tokens:
            raise self.refusal(
                f"renders message {index + 1} (assistant) as no tokens",
                "writes the assistant's messages",
            )
        return tokens

    def _check_writes_answers(self, turns: Sequence[Turn], whole: str) -> None:
        """Refuse a template whose rendering of `turns` (as `whole`) stays the same when its
        first or last assistant message says something else: it writes the assistant's role
        and end but not its words, so training would teach empty answers. Checked once a
        renderer (it is the template's doing, not the chat's)."""
        if self._writes_answers:
            return
        answers = [i for i, turn in enumerate(turns) if turn.role == "assistant"]
        for index in dict.fromkeys((answers[0], answers[-1])):
            changed = Turn("assistant", f"{turns[index].content} 42")
            if self.text([*turns[:index], changed, *turns[index + 1 :]]) == whole:
                raise self.refusal(
                    "does not write what the assistant says (its rendering is the same "
                    "whatever an assistant message holds), so the model would learn empty "
                    "answers",
                    "writes the assistant's messages",
                )
        self._writes_answers = True


def shared_prefix(text: str, other: str) -> int:
    """How many leading characters `text` and `other` share, found by halving (each step one
    string comparison, so long chats cost no character-by-character loop)."""
    low, high = 0, min(len(text), len(other))
    while low < high:
        middle = (low + high + 1) // 2
        if other.startswith(text[low:middle], low):
            low = middle
        else:
            high = middle - 1
    return low


def covering(offsets: Sequence[tuple[int, int]], start: int, end: int) -> range:
    """The tokens from the first to the last whose characters (`offsets`, end excluded) meet
    characters `start` to `end` (end excluded); an empty range when none does."""
    inside = [
        position
        for position, (first, last) in enumerate(offsets)
        if (first < end and last > start) or (first == last and start <= first < end)
    ]
    return range(inside[0], inside[-1] + 1) if inside else range(0)

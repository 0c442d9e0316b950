"""Prompts for text generation: token ids from a completion's prompt, and the checks a chat's
messages pass, against the server's limits and the model's window, before anything is queued.

A completion's prompt is tokenized as `tokenizer(prompt)` (with the tokenizer's special
tokens, e.g. a beginning-of-text token); a chat's messages go through a chat template with
the assistant's turn opened (`add_generation_prompt`), and the rendered text, which holds its
own special tokens, is tokenized without adding more. The template is the adapter's own when
its manifest has one (the template it was trained with), else the tokenizer's; with neither,
a chat is refused in one line, not formatted by a guess.

An adapter's template comes from its folder and is untrusted: like the tokenizer's, it is
rendered only by `apply_chat_template`, which compiles templates in Jinja's immutable sandbox
(no attributes of Python's internals, no changing the messages, no files, no imports), and
only in a render process bounded in time, output and memory (`adaptlab.serve.template_render`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from transformers import AutoConfig, PreTrainedTokenizerBase

from adaptlab.checks import shown
from adaptlab.models.decoder import is_encoder
from adaptlab.models.quiet import quiet_transformers
from adaptlab.models.resolve import load_errors, resolve_model
from adaptlab.serve.errors import RequestError, check_unicode


@dataclass(frozen=True)
class BaseInfo:
    """Whether the served base model generates text (a decoder with a causal-LM head in
    transformers), and the most tokens it takes: prompt and completion together."""

    decoder: bool
    window: int


def base_info(model_id: str, tokenizer: PreTrainedTokenizerBase) -> BaseInfo:
    """`model_id`'s generation facts, read from its config alone."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    source = resolve_model(model_id)
    with quiet_transformers(), load_errors(model_id, source):
        config = AutoConfig.from_pretrained(
            source.location, local_files_only=source.local_files_only
        )
    decoder = config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and not is_encoder(config)
    window = getattr(config, "max_position_embeddings", None) or tokenizer.model_max_length
    return BaseInfo(decoder=decoder, window=int(window))


class Prompts:
    """Token ids of prompts and chats for `tokenizer`, within `max_chars` characters and the
    model's `window`, asking for at most `max_tokens` new tokens."""

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, window: int, max_chars: int, max_tokens: int
    ) -> None:
        self.tokenizer = tokenizer
        self.window = window
        self.max_chars = max_chars
        self.max_tokens = max_tokens

    def completion(self, prompt: str) -> list[int]:
        """The token ids of a completion's prompt."""
        self._check_chars(len(prompt), "prompt")
        check_unicode(prompt, "prompt")
        ids: list[int] = self.tokenizer(prompt).input_ids
        if not ids:
            raise RequestError(422, "prompt is empty and this tokenizer adds no token to start")
        return ids

    def check_chat(self, messages: list[dict[str, str]], template: str | None) -> None:
        """Refuse a chat before it is rendered: no template to render it (`template` None and
        none in the tokenizer), messages over the limit or not valid Unicode."""
        if template is None and not self.tokenizer.chat_template:
            raise RequestError(
                400,
                "this model's tokenizer has no chat template, so chats cannot be formatted for "
                "it; send the text to POST /v1/completions",
            )
        self._check_chars(sum(len(m["content"]) for m in messages), "messages")
        for index, message in enumerate(messages):
            check_unicode(message["content"], f"messages[{index}].content")

    def new_tokens(self, prompt: Sequence[int], asked: int | None, default: int) -> int:
        """How many tokens to generate after `prompt`: `asked` (or `default`, cut to what
        the window leaves), refused past the server's limit or the window."""
        if asked is not None and asked > self.max_tokens:
            raise RequestError(
                400,
                f"max_tokens {shown(asked)} is above this server's limit of {self.max_tokens}",
            )
        room = self.window - len(prompt)
        if room < 1:
            raise RequestError(
                400,
                f"the prompt has {len(prompt)} tokens; this model takes {self.window} "
                "(prompt and completion together)",
            )
        if asked is None:
            return min(default, room, self.max_tokens)
        if asked > room:
            raise RequestError(
                400,
                f"the prompt's {len(prompt)} tokens and max_tokens {asked} make "
                f"{len(prompt) + asked}; this model takes {self.window}",
            )
        return asked

    def _check_chars(self, count: int, what: str) -> None:
        if count > self.max_chars:
            raise RequestError(413, f"{what} has {count} characters; the limit is {self.max_chars}")

"""What a generative run reads from its spec's data options, checked once: the data's columns,
whether the prompt trains, the chat template, packing, and how dev and test generate (new
tokens, stop strings, the metric that judges). Every value is part of the run's id, since each
changes what is trained or scored."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.checks import shown
from adaptlab.data.chat_render import ChatTemplate
from adaptlab.data.readers import decode_utf8, read_bytes
from adaptlab.errors import ConfigError

DEFAULT_NEW_TOKENS = 32
"""Tokens generated per dev or test prompt unless `max_new_tokens` says otherwise: enough for a
short answer or a sentence, few enough that scoring every epoch stays cheap."""
MAX_NEW_TOKENS = 4096
MAX_TEMPLATE_BYTES = 64 * 1024
"""The largest chat template a run takes (an adapter's manifest keeps it)."""
MAX_STOPS, MAX_STOP_CHARS = 4, 1000
"""Stop strings a run may give, and their length (the server's limits)."""

GENERATIVE_OPTIONS = (
    "prompt_column",
    "completion_column",
    "train_on_prompt",
    "chat_template",
    "pack",
    "max_new_tokens",
    "stop",
    "metric",
)
"""The data options only the generative tasks read."""
_KEYS = ("task", "text_column", *GENERATIVE_OPTIONS)


@dataclass(frozen=True)
class GenerativeSettings:
    """The data options of a generative run, validated."""

    text_column: str = "text"
    prompt_column: str = "prompt"
    completion_column: str = "completion"
    train_on_prompt: bool = False
    chat_template: Path | None = None
    pack: bool = False
    max_new_tokens: int = DEFAULT_NEW_TOKENS
    stop: tuple[str, ...] = ()
    metric: str | None = None

    @classmethod
    def of(cls, options: Mapping[str, Any], task: str) -> GenerativeSettings:
        """`options` (a spec's `data_options`) for `task`; an unknown key or a value of the
        wrong type or range is one line naming it."""
        unknown = sorted(set(options) - set(_KEYS))
        if unknown:
            raise ConfigError(
                f"task {task} takes no data option {unknown[0]!r}; it takes "
                f"{', '.join(k for k in _KEYS if k != 'task')}"
            )
        template = options.get("chat_template")
        return cls(
            text_column=_text(options, "text_column", "text"),
            prompt_column=_text(options, "prompt_column", "prompt"),
            completion_column=_text(options, "completion_column", "completion"),
            train_on_prompt=_flag(options, "train_on_prompt"),
            chat_template=None if template is None else Path(_text(options, "chat_template", "")),
            pack=_flag(options, "pack"),
            max_new_tokens=_new_tokens(options.get("max_new_tokens", DEFAULT_NEW_TOKENS)),
            stop=_stops(options.get("stop", ())),
            metric=None if options.get("metric") is None else _text(options, "metric", ""),
        )

    def template_text(self) -> str | None:
        """The chat template file's text (None when none was given)."""
        if self.chat_template is None:
            return None
        path = self.chat_template
        if not path.is_file():
            raise ConfigError(f"chat template {path} is not a file; pass a Jinja template file")
        if path.stat().st_size > MAX_TEMPLATE_BYTES:
            raise ConfigError(f"chat template {path} is over {MAX_TEMPLATE_BYTES:,} bytes")
        text = decode_utf8(read_bytes(path), path)
        if not text.strip():
            raise ConfigError(f"chat template {path} is empty")
        return text

    def chat_template_or(self, kept: ChatTemplate | None) -> ChatTemplate | None:
        """The chat template chats are rendered with and where it came from: the file's
        (`template_text`), else `kept` (the one an adapter's manifest keeps), else None (the
        tokenizer's own)."""
        path, text = self.chat_template, self.template_text()
        if path is not None and text is not None:
            return ChatTemplate.from_file(path, text)
        return kept


def _text(options: Mapping[str, Any], key: str, default: str) -> str:
    value = options.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key} must be a non-empty text, got {shown(value)}")
    return value


def _flag(options: Mapping[str, Any], key: str) -> bool:
    value = options.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{key} must be true or false, got {shown(value)}")
    return value


def _new_tokens(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_NEW_TOKENS:
        raise ConfigError(
            f"max_new_tokens must be a whole number from 1 to {MAX_NEW_TOKENS}, got {shown(value)}"
        )
    return value


def _stops(value: object) -> tuple[str, ...]:
    stops = (value,) if isinstance(value, str) else value
    if not isinstance(stops, Sequence) or not all(isinstance(s, str) and s for s in stops):
        raise ConfigError(f"stop must be a list of non-empty texts, got {shown(value)}")
    if len(stops) > MAX_STOPS or any(len(s) > MAX_STOP_CHARS for s in stops):
        raise ConfigError(
            f"stop takes at most {MAX_STOPS} strings of at most {MAX_STOP_CHARS} characters"
        )
    return tuple(stops)

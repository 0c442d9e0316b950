"""The server's options: what it serves and the limits it enforces, checked once at start."""

from __future__ import annotations

from dataclasses import dataclass, field
from math import inf

import adaptlab.checks as checks
from adaptlab.data.template_bounds import RENDER_SECONDS
from adaptlab.errors import ConfigError
from adaptlab.serve.auth import check_key


@dataclass(frozen=True)
class ServeOptions:
    """Where the adapters are, which base model they run on, and every limit of the server.

    `max_batch` texts run in one forward at most; a batch waits at most `max_wait_ms` for more
    requests after its first. `max_loaded` / `max_loaded_mb` cap the adapters kept in memory
    (least recently used leave first). `max_texts` / `max_chars` cap one request (a prompt
    or a chat's messages: `max_chars` characters). `max_tokens` caps the tokens one completion
    may generate; at most `max_batch` sequences generate at once. A chat template that takes
    longer than `max_render_seconds` to render a chat is stopped and the chat refused.
    `api_key`, when set, is what every request but `/health` must send (`Authorization: Bearer
    <api_key>`); it is left out of the options' repr, so that logs do not show it.
    """

    model: str
    adapters: str
    max_batch: int = 32
    max_wait_ms: float = 5.0
    max_loaded: int = 16
    max_loaded_mb: float = 1024.0
    max_texts: int = 64
    max_chars: int = 10_000
    max_length: int = 128
    max_tokens: int = 512
    device: str = "cpu"
    max_render_seconds: float = RENDER_SECONDS
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("max_batch", "max_loaded", "max_texts", "max_chars", "max_tokens"):
            checks.positive(getattr(self, name), _option(name))
        checks.at_least(self.max_length, 2, "--max-length")
        checks.positive_finite(self.max_loaded_mb, "--max-loaded-mb")
        checks.positive_finite(self.max_render_seconds, "--max-render-seconds")
        wait = self.max_wait_ms
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait < inf:
            raise ConfigError(f"--max-wait-ms must be a finite number >= 0, got {wait!r}")
        check_key(self.api_key)

    @property
    def max_loaded_bytes(self) -> int:
        return round(self.max_loaded_mb * 2**20)


def megabytes(count: int) -> str:
    """`count` bytes in MB, to four significant digits: '0.001', '1.5', '1024'."""
    return f"{count / 2**20:.4g}"


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")

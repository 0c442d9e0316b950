"""The OpenAI-compatible requests and answers: completions, chat completions, their stream
chunks, and the model list, in the shapes the official `openai` client reads.

Requests take the fields this server honours (`max_tokens`, `temperature`, `top_p`, `stop`,
`seed`, `stream`, `stream_options.include_usage`; chats also `max_completion_tokens`; `n` of 1
and `user`, which clients often send) and refuse any other field in one line, so an option
the server would ignore is never silently dropped. Errors are `{"error": {"message": "<one
line>", "type": ..., "code": <status>}}`, whose message the `openai` client shows. Stop
strings are bounded (`MAX_STOPS` of at most `MAX_STOP_CHARS` characters) so that no request
can make the stop check long.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Collection
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from adaptlab.engine.sampling import Sampling
from adaptlab.serve.errors import RequestError, check_unicode

PREFIX = "/v1"
"""Where the OpenAI-compatible routes live."""

COMPLETION_DEFAULT_TOKENS = 16
"""OpenAI's default `max_tokens` for a completion (a chat's default is what the window leaves)."""

MAX_STOPS = 4
"""Stop strings one request may give (OpenAI's limit)."""

MAX_STOP_CHARS = 1_000
"""Characters one stop string may hold."""


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    include_usage: StrictBool = False


class _Generation(BaseModel):
    """What completions and chat completions share."""

    model_config = ConfigDict(extra="forbid")
    model: StrictStr = Field(description="The base model's name or an adapter's, from /v1/models.")
    max_tokens: StrictInt | None = Field(None, ge=1, description="Most tokens to generate.")
    temperature: float = Field(
        1.0,
        ge=0,
        le=2,
        strict=True,
        allow_inf_nan=False,
        description="0: greedy; higher: more random.",
    )
    top_p: float = Field(
        1.0,
        gt=0,
        le=1,
        strict=True,
        allow_inf_nan=False,
        description="Nucleus sampling's probability mass.",
    )
    stop: StrictStr | list[StrictStr] | None = Field(
        None,
        description=f"Up to {MAX_STOPS} strings of at most {MAX_STOP_CHARS} characters; the text "
        "ends before the first one generated.",
    )
    seed: StrictInt | None = Field(  # the range torch.Generator.manual_seed takes
        None, ge=-(2**63), le=2**64 - 1, description="Seeds the sampling."
    )
    stream: StrictBool = Field(False, description="Send the text as server-sent events.")
    stream_options: StreamOptions | None = None
    n: StrictInt = Field(1, ge=1, le=1, description="Choices per request: 1.")
    user: StrictStr | None = Field(None, description="The end user's id (not used).")

    def stops(self) -> tuple[str, ...]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return tuple(stops)

    def sampling(self, max_tokens: int) -> Sampling:
        return Sampling(max_tokens, self.temperature, self.top_p, self.stops(), self.seed)

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


class CompletionRequest(_Generation):
    """POST /v1/completions: continue `prompt`."""

    prompt: StrictStr


class TextPart(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["text"]
    text: StrictStr


class Message(BaseModel):
    """One chat message; content is text, or text parts joined."""

    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "developer", "user", "assistant"]
    content: StrictStr | list[TextPart]
    name: StrictStr | None = None

    def as_dict(self) -> dict[str, str]:
        content = self.content
        text = content if isinstance(content, str) else "".join(p.text for p in content)
        role = "system" if self.role == "developer" else self.role
        return {"role": role, "content": text}


class ChatRequest(_Generation):
    """POST /v1/chat/completions: the assistant's next message after `messages`."""

    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: StrictInt | None = Field(None, ge=1, description="As max_tokens.")

    def asked_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


def check_stops(request: _Generation) -> None:
    """Refuse (400) more than `MAX_STOPS` stop strings, or one that is empty, longer than
    `MAX_STOP_CHARS` or not valid Unicode."""
    stops = request.stops()
    if len(stops) > MAX_STOPS:
        raise RequestError(400, f"stop has {len(stops)} strings; at most {MAX_STOPS}")
    for index, stop in enumerate(stops):
        where = "stop" if isinstance(request.stop, str) else f"stop[{index}]"
        if not stop:
            raise RequestError(400, f"{where} is empty: a stop string needs a character")
        if len(stop) > MAX_STOP_CHARS:
            raise RequestError(
                400,
                f"{where} has {len(stop)} characters; a stop string has at most {MAX_STOP_CHARS}",
            )
        check_unicode(stop, where)


class Answer:
    """The bodies of one completion's answer: whole, or chunk by chunk (`chat` or not)."""

    def __init__(self, model: str, chat: bool) -> None:
        self.model, self.chat = model, chat
        self.id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        self.created = int(time.time())

    def whole(self, text: str, reason: str, usage: dict[str, int]) -> dict[str, Any]:
        if self.chat:
            choice: dict[str, Any] = {"message": {"role": "assistant", "content": text}}
        else:
            choice = {"text": text}
        choice.update(index=0, finish_reason=reason, logprobs=None)
        return self._body(self._object(), [choice], usage=usage)

    def chunk(self, text: str | None, reason: str | None = None) -> dict[str, Any]:
        """More text (None and a reason: the last chunk; a chat's first chunk says the role)."""
        if self.chat:
            delta = {"role": "assistant", "content": ""} if text is None and reason is None else {}
            choice: dict[str, Any] = {"delta": {"content": text} if text is not None else delta}
        else:
            choice = {"text": text or ""}
        choice.update(index=0, finish_reason=reason, logprobs=None)
        return self._body(self._object(chunk=True), [choice])

    def usage_chunk(self, usage: dict[str, int]) -> dict[str, Any]:
        return self._body(self._object(chunk=True), [], usage=usage)

    def _object(self, chunk: bool = False) -> str:
        if self.chat:
            return "chat.completion.chunk" if chunk else "chat.completion"
        return "text_completion"

    def _body(self, kind: str, choices: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
        body = {"id": self.id, "object": kind, "created": self.created, "model": self.model}
        return {**body, "choices": choices, **more}


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def model_list(
    models: list[tuple[str, str | None]], chats: Collection[str], created: int
) -> dict[str, Any]:
    """GET /v1/models: every model name a request may give, adapters with their base, and
    `chat`: whether /v1/chat/completions takes it (it is among `chats`)."""
    rows = [
        {
            "id": name,
            "object": "model",
            "created": created,
            "owned_by": "adaptlab",
            "root": parent or name,
            "parent": parent,
            "chat": name in chats,
        }
        for name, parent in models
    ]
    return {"object": "list", "data": rows}


def error_body(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """An error as OpenAI sends it: the one line in `error.message`, `code` the status unless
    a name is given (`invalid_api_key`)."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": code or status}}

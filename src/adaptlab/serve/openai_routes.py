"""The OpenAI-compatible endpoints: `GET /v1/models`, `POST /v1/completions` and
`POST /v1/chat/completions`, where the request's `model` names a causal-LM adapter of the
registry or the base model itself (as vLLM and LoRAX serve LoRA adapters), so any OpenAI
client works unchanged.

A request is checked (model, prompt, limits) before it is queued; the answer waits for the
completion's first token, so an adapter that fails to load is still an HTTP error. With
`stream: true` the text comes as server-sent events, `data: {chunk}` each, ending with
`data: [DONE]`; a client that goes away stops its completion at the next step.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response, StreamingResponse

from adaptlab.engine.generation import Completion, Event, Failure, Finish, Piece
from adaptlab.errors import AdaptlabError
from adaptlab.serve.errors import RequestError
from adaptlab.serve.openai_schema import (
    COMPLETION_DEFAULT_TOKENS,
    PREFIX,
    Answer,
    ChatRequest,
    CompletionRequest,
    check_stops,
    error_body,
    model_list,
    usage,
)
from adaptlab.serve.service import AdapterService


def openai_router(service: AdapterService) -> APIRouter:
    """The /v1 routes over `service`."""
    router = APIRouter(prefix=PREFIX, tags=["OpenAI-compatible"])
    started = int(time.time())

    @router.get("/models")
    def models() -> dict[str, Any]:
        """Every model a request may name: the base model (when it generates) and every
        causal-LM adapter, with the base it runs on as `parent` and whether it takes chats
        (`chat`: it has a chat template, its own or the tokenizer's)."""
        return model_list(service.models(), service.chat_models(), started)

    @router.post("/completions")
    async def completions(body: CompletionRequest) -> Response:
        """Continue `prompt` with the model named (OpenAI's legacy completions)."""
        check_stops(body)
        name = service.generating_model(body.model)
        ids = service.prompts.completion(body.prompt)
        tokens = service.prompts.new_tokens(ids, body.max_tokens, COMPLETION_DEFAULT_TOKENS)
        return await _answer(service, body, name, ids, tokens, Answer(body.model, chat=False))

    @router.post("/chat/completions")
    async def chat_completions(body: ChatRequest) -> Response:
        """The assistant's next message, the chat formatted by the adapter's chat template (the
        one it was trained with), else by the tokenizer's."""
        check_stops(body)
        name = service.generating_model(body.model)
        ids = await service.chat_ids(name, [message.as_dict() for message in body.messages])
        tokens = service.prompts.new_tokens(ids, body.asked_tokens(), service.options.max_tokens)
        return await _answer(service, body, name, ids, tokens, Answer(body.model, chat=True))

    return router


class _Channel:
    """Events from the model thread, read on the event loop."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[Event] = asyncio.Queue()

    def put(self, event: Event) -> None:  # on the model thread
        self._loop.call_soon_threadsafe(self._queue.put_nowait, event)

    async def get(self) -> Event:
        return await self._queue.get()


async def _answer(
    service: AdapterService,
    body: CompletionRequest | ChatRequest,
    name: str | None,
    ids: list[int],
    tokens: int,
    answer: Answer,
) -> Response:
    channel = _Channel()
    job = Completion(name, ids, body.sampling(tokens), channel.put)
    service.generate(job)
    try:
        first = await channel.get()
    except BaseException:
        job.cancelled = True
        raise
    if isinstance(first, Failure):
        return _failed(first.error)
    if body.stream:
        events = _stream(channel, job, first, answer, body.include_usage)
        return StreamingResponse(events, media_type="text/event-stream")
    pieces: list[str] = []
    event: Event = first
    while not isinstance(event, Finish):
        if isinstance(event, Failure):
            return _failed(event.error)
        pieces.append(event.text)
        event = await channel.get()
    counts = usage(event.prompt_tokens, event.completion_tokens)
    return JSONResponse(answer.whole("".join(pieces), event.reason, counts))


async def _stream(
    channel: _Channel, job: Completion, event: Event, answer: Answer, include_usage: bool
) -> AsyncIterator[str]:
    """Server-sent events from the first event to the end, then `[DONE]`."""
    try:
        if answer.chat:
            yield _sse(answer.chunk(None))  # the assistant's role comes first
        while True:
            if isinstance(event, Piece):
                yield _sse(answer.chunk(event.text))
            elif isinstance(event, Finish):
                yield _sse(answer.chunk(None, event.reason))
                if include_usage:
                    counts = usage(event.prompt_tokens, event.completion_tokens)
                    yield _sse(answer.usage_chunk(counts))
                break
            else:
                yield _sse(error_body(*_status(event.error)))
                break
            event = await channel.get()
        yield "data: [DONE]\n\n"
    finally:
        job.cancelled = True  # a client gone mid-stream frees its row


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data, separators=(',', ':'))}\n\n"


def _failed(error: BaseException) -> JSONResponse:
    status, message = _status(error)
    return JSONResponse(error_body(status, message), status_code=status)


def _status(error: BaseException) -> tuple[int, str]:
    if isinstance(error, RequestError):
        return error.status, str(error)
    if isinstance(error, AdaptlabError):
        return 500, str(error)
    return 500, f"generation failed: {type(error).__name__}: {error}"

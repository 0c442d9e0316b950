"""What a request passes before the app reads it: the server's key, then the size of its body.

`RequestGate` is a plain ASGI middleware, so a request without the key is answered before
its body is read, and a body over the limit is refused whether it declares its size
(`Content-Length`) or comes in chunks without one, once no more than the limit has been read.
A refusal has the shape of the path's other errors (`error_response`).
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adaptlab.serve.auth import OPEN_PATHS, authorized
from adaptlab.serve.openai_schema import PREFIX, error_body


def error_response(
    path: str, status: int, message: str, *, code: str | None = None, **kwargs: Any
) -> JSONResponse:
    """A refusal as the path's clients read it: OpenAI's error object under /v1 (`code`, if
    given, in place of the status), `{"error": "<one line>"}` elsewhere."""
    if path.startswith(f"{PREFIX}/"):
        return JSONResponse(error_body(status, message, code), status_code=status, **kwargs)
    return JSONResponse({"error": message}, status_code=status, **kwargs)


class RequestGate:
    """Answers 401 to a request without `key` (if one is set; `OPEN_PATHS` excepted) and 413
    to a body over `body_limit` bytes; passes every other request on with its body."""

    def __init__(self, app: ASGIApp, key: str | None, body_limit: int) -> None:
        self.app = app
        self.key = None if key is None else key.encode("ascii")
        self.body_limit = body_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        headers = dict(scope["headers"])
        keys = [value for name, value in scope["headers"] if name == b"authorization"]
        refusal = self._unauthorized(path, keys)
        size = headers.get(b"content-length", b"")  # one too long to be true is counted below
        if refusal is None and size.isdigit() and len(size) < 19 and int(size) > self.body_limit:
            message = f"request body of {int(size)} bytes is over {self.body_limit}"
            refusal = error_response(path, 413, message)
        if refusal is None:
            body = await _read_body(receive, self.body_limit)
            if body is not None:
                await self.app(scope, _replay(body, receive), send)
                return
            refusal = error_response(path, 413, f"request body is over {self.body_limit} bytes")
        await refusal(scope, receive, send)

    def _unauthorized(self, path: str, headers: list[bytes]) -> JSONResponse | None:
        """The 401 answer to a request that does not carry the key in one `Authorization`
        header; None if it may pass."""
        if self.key is None or path in OPEN_PATHS:
            return None
        if len(headers) == 1 and authorized(headers[0], self.key):
            return None
        if not headers:
            message = (
                "this server wants a key: send the header 'Authorization: Bearer <key>' "
                "(the openai client's api_key)"
            )
        else:
            message = "the key sent in the Authorization header is not this server's key"
        challenge = {"WWW-Authenticate": "Bearer"}
        return error_response(path, 401, message, code="invalid_api_key", headers=challenge)


async def _read_body(receive: Receive, limit: int) -> Message | None:
    """The whole request body as one message (or the disconnect that cut it short); None as
    soon as more than `limit` bytes have come."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return message
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}


def _replay(first: Message, receive: Receive) -> Receive:
    """`receive` that gives `first` (the body already read) once, then what the client sends."""
    pending = [first]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()

    return replayed

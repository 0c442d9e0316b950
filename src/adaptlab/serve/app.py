"""The HTTP API (FastAPI): /health, /adapters, /predict, /admin/reload, /metrics, /docs, and
the OpenAI-compatible /v1/models, /v1/completions, /v1/chat/completions
(`adaptlab.serve.openai_routes`).

Every refusal is a 4xx with a JSON body {"error": "<one line naming the problem>"}; under /v1
the line is OpenAI's `error.message` ({"error": {"message": ..., "type": ..., "code": ...}}),
where OpenAI clients look for it. With a key in the options, a request reaches a route only
with it (`adaptlab.serve.gate`; `/health` excepted).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictStr
from starlette.exceptions import HTTPException

from adaptlab.checks import shown
from adaptlab.errors import AdaptlabError
from adaptlab.records.threads import ThreadUse
from adaptlab.serve.errors import RequestError
from adaptlab.serve.gate import RequestGate, error_response
from adaptlab.serve.openai_routes import openai_router
from adaptlab.serve.openai_schema import PREFIX
from adaptlab.serve.service import AdapterService
from adaptlab.version import __version__

_BODY_SLACK = 64 * 1024
"""Bytes a /predict body may hold beyond its texts (JSON quoting, the adapter name)."""

_UNPARSED = "There was an error parsing the body"
"""FastAPI's words for a body that json.loads could not take (bad UTF-8, nested too deep, a
number too long)."""


class PredictRequest(BaseModel):
    """One adapter and the texts to label with it."""

    model_config = ConfigDict(extra="forbid")
    adapter: StrictStr = Field(description="A name from GET /adapters.")
    texts: list[StrictStr] = Field(description="Texts to label; token tasks split on spaces.")


class PredictResponse(BaseModel):
    """One prediction per text, as `adaptlab predict --jsonl` prints them."""

    adapter: str
    predictions: list[dict[str, Any]]


def create_app(service: AdapterService) -> FastAPI:
    """The FastAPI app serving `service` (run it with uvicorn, or under Ray Serve)."""
    app = FastAPI(
        title="adaptlab serve",
        version=__version__,
        description=f"Adapters on {service.options.model}, one base model in memory.",
    )
    metrics = service.metrics
    body_limit = service.options.max_texts * (service.options.max_chars * 4 + 8) + _BODY_SLACK
    app.add_middleware(RequestGate, key=service.options.api_key, body_limit=body_limit)

    @app.middleware("http")  # added last, so it runs first: it also counts the gate's refusals
    async def measure(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        start = time.perf_counter()
        endpoint = request.url.path if request.url.path in _ENDPOINTS else "other"
        response = await call_next(request)
        metrics.requests.labels(endpoint, str(response.status_code)).inc()
        metrics.latency.labels(endpoint).observe(time.perf_counter() - start)
        return response

    @app.exception_handler(RequestError)
    async def refused(request: Request, error: RequestError) -> JSONResponse:
        return _error(request, error.status, str(error))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        kind = request.headers.get("content-type", "application/json")
        errors = error.errors()
        if not _is_json(kind) and errors and errors[0].get("loc") == ("body",):
            message = (
                f"send the body as JSON, with 'Content-Type: application/json' (not {shown(kind)})"
            )
            return _error(request, 422, message)
        return _error(request, 422, _describe(errors))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException) -> JSONResponse:
        """FastAPI's own refusals (no such route, a body it cannot parse) in the same shape."""
        message = str(error.detail)
        if message == _UNPARSED:
            message = (
                "the body is not JSON this server can read (bad UTF-8, nested too deep or a "
                "number too long): send plain UTF-8 JSON"
            )
        return _error(request, error.status_code, message)

    @app.exception_handler(AdaptlabError)
    async def failed(request: Request, error: AdaptlabError) -> JSONResponse:
        return _error(request, 500, str(error))

    @app.get("/health")
    def health() -> dict[str, Any]:
        """The server is up: its base model, how many adapters it has and has loaded, and the
        CPU threads it computes with and how they wait (`adaptlab.threads`)."""
        threads = ThreadUse.current()
        return {
            "status": "ok",
            "base_model": service.options.model,
            "adapters": len(service.registry.entries),
            "loaded": len(service.pool.names),
            "threads": threads.threads,
            "wait_policy": threads.wait_policy,
        }

    @app.get("/adapters")
    def adapters() -> dict[str, Any]:
        """Every adapter: name, task, labels, method, size, base fingerprint, metrics."""
        return service.adapters()

    @app.post("/predict", response_model=PredictResponse)
    async def predict(body: PredictRequest) -> PredictResponse:
        """Label every text with the adapter named: label and score (tags for token tasks)."""
        predictions = await asyncio.wrap_future(service.predict(body.adapter, body.texts))
        return PredictResponse(adapter=body.adapter, predictions=[p.to_dict() for p in predictions])

    @app.post("/admin/reload")
    async def reload() -> dict[str, Any]:
        """Rescan the registry folder: new adapters appear, removed or changed ones leave."""
        registry = await asyncio.wrap_future(service.reload())
        return {"adapters": list(registry.entries), "refused": registry.refused}

    @app.get("/metrics")
    def prometheus() -> Response:
        """Request counts, latency and batch-size histograms in Prometheus text format."""
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    app.include_router(openai_router(service))
    return app


_ENDPOINTS = frozenset(
    [
        "/health",
        "/adapters",
        "/predict",
        "/admin/reload",
        "/metrics",
        f"{PREFIX}/models",
        f"{PREFIX}/completions",
        f"{PREFIX}/chat/completions",
    ]
)


def _error(request: Request, status: int, message: str) -> JSONResponse:
    return error_response(request.url.path, status, message)


def _is_json(content_type: str) -> bool:
    """Whether FastAPI reads a body of this media type as JSON."""
    kind = content_type.partition(";")[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


def _describe(errors: Any) -> str:
    """The first validation error as one line: 'texts[2]: Input should be a valid string'."""
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":  # loc is ("body", <character>)
        reason = first.get("ctx", {}).get("error", "")
        return f"the body is not valid JSON: {reason} at character {first['loc'][-1]}"
    parts = [p for p in first.get("loc", ()) if p != "body"]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")
    return f"{where or 'body'}: {first.get('msg', 'invalid request')}"

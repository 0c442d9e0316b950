"""The HTTP API (FastAPI): /health, /adapters, /predict, /admin/reload, /metrics, /docs, and
the OpenAI-compatible /v1/models, /v1/completions, /v1/chat/completions
(`adaptlab.serve.openai_routes`).

Every refusal is a 4xx with a JSON body {"error": "<one line naming the problem>"}; under /v1
the line is OpenAI's `error.message` ({"error": {"message": ..., "type": ..., "code": ...}}),
where OpenAI clients look for it.
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

from adaptlab.errors import AdaptlabError
from adaptlab.serve.errors import RequestError
from adaptlab.serve.openai_routes import PREFIX, openai_router
from adaptlab.serve.openai_schema import error_body
from adaptlab.serve.service import AdapterService
from adaptlab.version import __version__

_BODY_SLACK = 64 * 1024
"""Bytes a /predict body may hold beyond its texts (JSON quoting, the adapter name)."""


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

    @app.middleware("http")
    async def measure(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        start = time.perf_counter()
        endpoint = request.url.path if request.url.path in _ENDPOINTS else "other"
        size = request.headers.get("content-length", "")
        if size.isdigit() and int(size) > body_limit:
            message = f"request body of {size} bytes is over {body_limit}"
            response: Response = _error(request, 413, message)
        else:
            response = await call_next(request)
        metrics.requests.labels(endpoint, str(response.status_code)).inc()
        metrics.latency.labels(endpoint).observe(time.perf_counter() - start)
        return response

    @app.exception_handler(RequestError)
    async def refused(request: Request, error: RequestError) -> JSONResponse:
        return _error(request, error.status, str(error))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        return _error(request, 422, _describe(error.errors()))

    @app.exception_handler(AdaptlabError)
    async def failed(request: Request, error: AdaptlabError) -> JSONResponse:
        return _error(request, 500, str(error))

    @app.get("/health")
    def health() -> dict[str, Any]:
        """The server is up: its base model, how many adapters it has and has loaded."""
        return {
            "status": "ok",
            "base_model": service.options.model,
            "adapters": len(service.registry.entries),
            "loaded": len(service.pool.names),
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
    if request.url.path.startswith(f"{PREFIX}/"):
        return JSONResponse(error_body(status, message), status_code=status)
    return JSONResponse({"error": message}, status_code=status)


def _describe(errors: Any) -> str:
    """The first validation error as one line: 'texts[2]: Input should be a valid string'."""
    first = errors[0] if errors else {}
    parts = [p for p in first.get("loc", ()) if p != "body"]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")
    return f"{where or 'body'}: {first.get('msg', 'invalid request')}"

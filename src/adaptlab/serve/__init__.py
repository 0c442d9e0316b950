"""Serve many adapters on one base model over HTTP: a registry folder, an LRU of loaded
adapters, dynamic batching on one model thread, Prometheus metrics, and Ray Serve to scale out;
causal-LM adapters generate text behind an OpenAI-compatible API (`/v1/completions`).

    from adaptlab.serve import ServeOptions, AdapterService, create_app
    service = AdapterService(ServeOptions(model="minilm-l6", adapters="runs/"))
    app = create_app(service)          # a FastAPI app: uvicorn.run(app) or Ray Serve
"""

from typing import TYPE_CHECKING

from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
    from adaptlab.serve.app import create_app  # FastAPI is an extra: imported only when used
    from adaptlab.serve.options import ServeOptions
    from adaptlab.serve.service import AdapterService

__all__ = ["AdapterService", "ServeOptions", "create_app"]

lazy_face(__name__)

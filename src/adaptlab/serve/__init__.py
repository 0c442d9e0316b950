"""Serve many adapters on one base model over HTTP: a registry folder, an LRU of loaded
adapters, dynamic batching on one model thread, Prometheus metrics, and Ray Serve to scale out.

    from adaptlab.serve import ServeOptions, AdapterService, create_app
    service = AdapterService(ServeOptions(model="minilm-l6", adapters="runs/"))
    app = create_app(service)          # a FastAPI app: uvicorn.run(app) or Ray Serve
"""

from adaptlab.serve.options import ServeOptions
from adaptlab.serve.service import AdapterService

__all__ = ["AdapterService", "ServeOptions", "create_app"]


def __getattr__(name: str) -> object:
    if name == "create_app":  # FastAPI is an extra: import it only when the app is wanted
        from adaptlab.serve.app import create_app

        return create_app
    raise AttributeError(name)

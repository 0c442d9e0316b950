"""The same app under Ray Serve: `replicas` copies, each with its own base model and pool.

Each replica builds an `AdapterService` from the options (so the registry folder must be
readable at the same path on every node of the cluster) and serves `create_app` on it;
Ray Serve's proxy spreads requests over the replicas. The key rule is the local server's:
each replica's app wants `options.api_key`, and a host other than loopback needs one.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.serve.auth import check_listening
from adaptlab.serve.options import ServeOptions
from adaptlab.threads import threads_for_cpus

RAY_SERVE_HINT = "--ray needs Ray Serve: `pip install -c constraints.txt 'ray[serve]==2.60.0'`"
APP_NAME = "adaptlab"


def deployment(options: ServeOptions, replicas: int = 1, cpus: float = 1.0) -> Any:
    """A bound Ray Serve application serving `options` with `replicas` replicas."""
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ConfigError(f"--replicas must be a whole number >= 1, got {replicas!r}")
    serve = _import_serve()
    options = replace(options, adapters=str(Path(options.adapters).resolve()))
    threads = {"env_vars": threads_for_cpus(cpus).environment()}  # set before its torch loads
    actor = {"num_cpus": cpus, "runtime_env": threads}

    @serve.deployment(name=APP_NAME, num_replicas=replicas, ray_actor_options=actor)
    @serve.ingress()
    class AdaptlabServer:
        def __init__(self, options: ServeOptions) -> None:
            from adaptlab.serve.service import AdapterService

            self.service = AdapterService(options)

        def __serve_build_asgi_app__(self) -> Any:
            from adaptlab.serve.app import create_app

            return create_app(self.service)

    return AdaptlabServer.bind(options)  # type: ignore[attr-defined]


def run(
    options: ServeOptions,
    *,
    replicas: int = 1,
    address: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    blocking: bool = True,
    insecure_no_key: bool = False,
) -> None:
    """Start (or join, with `address`) a Ray cluster and serve the app on host:port; a host
    other than loopback needs `options.api_key` (or `insecure_no_key`)."""
    check_listening(host, options.api_key, insecure_no_key)
    app = deployment(options, replicas)
    import ray
    from ray import serve

    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
    serve.start(http_options={"host": host, "port": port})
    serve.run(app, name=APP_NAME, route_prefix="/", blocking=blocking)


def _import_serve() -> Any:
    try:
        from ray import serve
    except ImportError:
        raise ConfigError(RAY_SERVE_HINT) from None
    return serve

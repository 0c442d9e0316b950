"""`adaptlab serve`: an HTTP server for every adapter of a registry folder, on one base model."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from adaptlab.cli.options import Device, MaxLength
from adaptlab.data.template_bounds import RENDER_SECONDS
from adaptlab.errors import ConfigError

SERVE_HINT = (
    "adaptlab serve needs the serve extra: run `pip install -c constraints.txt -e '.[serve]'` "
    "in the adaptlab checkout (make setup installs it)"
)
SHUTDOWN_SECONDS = 3
"""How long requests in flight may run on after SIGTERM or Ctrl-C before they are cut."""


def serve(
    model: Annotated[str, typer.Option("--model", help="Base model the adapters were trained on.")],
    adapters: Annotated[
        Path, typer.Option(help="Registry folder: adapter or run folders, one per adapter.")
    ],
    host: Annotated[
        str, typer.Option(help="Address to listen on; any but loopback needs --api-key.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    max_batch: Annotated[int, typer.Option(help="Most texts in one forward pass.")] = 32,
    max_wait_ms: Annotated[
        float, typer.Option(help="How long a batch waits for more requests after its first.")
    ] = 5.0,
    max_loaded: Annotated[int, typer.Option(help="Most adapters kept in memory (LRU).")] = 16,
    max_loaded_mb: Annotated[
        float, typer.Option(help="Most MB of adapter tensors kept in memory (LRU).")
    ] = 1024.0,
    max_texts: Annotated[int, typer.Option(help="Most texts in one request.")] = 64,
    max_chars: Annotated[int, typer.Option(help="Most characters in one text.")] = 10_000,
    max_length: MaxLength = 128,
    max_tokens: Annotated[
        int, typer.Option(help="Most tokens one completion may generate (/v1 endpoints).")
    ] = 512,
    device: Device = "auto",
    max_render_seconds: Annotated[
        float, typer.Option(help="Most seconds a chat template may take to render a chat.")
    ] = RENDER_SECONDS,
    ray: Annotated[bool, typer.Option("--ray", help="Deploy with Ray Serve.")] = False,
    replicas: Annotated[int, typer.Option(help="Ray Serve replicas (with --ray).")] = 1,
    address: Annotated[
        str | None, typer.Option(help="Existing Ray cluster to deploy on (with --ray), e.g. auto.")
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            help="Key every request but /health must send as 'Authorization: Bearer KEY' "
            "(default: the ADAPTLAB_API_KEY environment variable).",
            show_default=False,
        ),
    ] = None,
    insecure_no_key: Annotated[
        bool,
        typer.Option(
            "--insecure-no-key", help="Listen beyond loopback without a key: anyone may call it."
        ),
    ] = False,
) -> None:
    """Serve every adapter under a folder over HTTP, one base model in memory.

    Example:

        adaptlab serve --model minilm-l6 --adapters runs/
        curl -s localhost:8000/predict -H 'content-type: application/json' \\
            -d '{"adapter": "rt-houlsby", "texts": ["a witty film"]}'

    Causal-LM adapters (and a decoder base model itself) generate text through the
    OpenAI-compatible /v1/completions and /v1/chat/completions, `model` naming the adapter.

    Open to a network, the server wants a key:

        export ADAPTLAB_API_KEY=$(openssl rand -hex 32)    # clients send it as their api_key
        adaptlab serve --model minilm-l6 --adapters runs/ --host 0.0.0.0
    """
    from adaptlab.serve.auth import API_KEY_ENV, check_key, check_listening

    if not 1 <= port <= 65535:
        raise ConfigError(f"--port must be from 1 to 65535, got {port}")
    if not ray and (replicas != 1 or address is not None):
        raise ConfigError("--replicas and --address go with --ray")
    if api_key is None:
        key = check_key(os.environ.get(API_KEY_ENV), API_KEY_ENV)
    else:
        key = check_key(api_key)
    check_listening(host, key, insecure_no_key)
    try:
        from adaptlab.serve.app import create_app
        from adaptlab.serve.options import ServeOptions
        from adaptlab.serve.service import AdapterService
    except ImportError:
        raise ConfigError(SERVE_HINT) from None
    options = ServeOptions(
        model=model,
        adapters=str(adapters),
        max_batch=max_batch,
        max_wait_ms=max_wait_ms,
        max_loaded=max_loaded,
        max_loaded_mb=max_loaded_mb,
        max_texts=max_texts,
        max_chars=max_chars,
        max_length=max_length,
        max_tokens=max_tokens,
        device=device,
        max_render_seconds=max_render_seconds,
        api_key=key,
    )
    if ray:
        from adaptlab.serve import ray_serve

        ray_serve.run(
            options,
            replicas=replicas,
            address=address,
            host=host,
            port=port,
            insecure_no_key=insecure_no_key,
        )
        return
    import uvicorn

    service = AdapterService(options)
    registry = service.registry
    typer.echo(f"{len(registry.entries)} adapters on {model}: {', '.join(registry.entries)}")
    for name, reason in registry.refused.items():
        typer.echo(f"refused {name}: {reason}")
    generating = [name for name, _ in service.models()]
    if generating:
        typer.echo(f"generating text at /v1 (OpenAI-compatible) as: {', '.join(generating)}")
    guard = "every route but /health wants the key" if key else "no key: anyone who reaches it"
    typer.echo(f"listening on http://{host}:{port} ({guard}; OpenAPI documentation at /docs)")
    try:
        uvicorn.run(
            create_app(service),
            host=host,
            port=port,
            log_level="warning",
            timeout_graceful_shutdown=SHUTDOWN_SECONDS,
        )
    finally:
        service.close()

"""The serving core without HTTP: registry, shared base model, adapter pool, model thread.

`AdapterService` is what both the uvicorn app and each Ray Serve replica hold. Requests are
checked here (adapter name, input sizes), predictions come back as futures from the model
thread, and `reload` rescans the registry between batches.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from adaptlab.data import TextEncoder
from adaptlab.methods.manifest import NAME
from adaptlab.serve.base import SharedBase
from adaptlab.serve.errors import RequestError
from adaptlab.serve.metrics import ServeMetrics
from adaptlab.serve.options import ServeOptions
from adaptlab.serve.pool import AdapterPool
from adaptlab.serve.registry import Entry, Registry, scan_registry
from adaptlab.serve.worker import ModelThread
from adaptlab.train.predict import Prediction, predict


class AdapterService:
    """Serves every adapter of the registry folder `options.adapters` on `options.model`."""

    def __init__(self, options: ServeOptions) -> None:
        self.options = options
        self.base = SharedBase(options.model, options.device)
        # a --max-length the model cannot take (or a tokenizer that cannot pad) fails here
        TextEncoder(self.base.tokenizer, "regression", 1, options.max_length)
        self.registry = self._scan()
        self.pool = AdapterPool(
            self.base, options.max_loaded, options.max_loaded_bytes, options.max_length
        )
        self.metrics = ServeMetrics()
        self._thread = ModelThread(
            self._run_group,
            options.max_batch,
            options.max_wait_ms / 1000,
            self.metrics.observe_batch,
        )

    def entry(self, name: object) -> Entry:
        """The registry entry called `name`; a RequestError if there is none."""
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise RequestError(
                400,
                f"adapter {name!r} is not an adapter name: give a name from GET /adapters "
                "(letters, digits, '-', '_'), never a path",
            )
        registry = self.registry
        if name in registry.refused:
            raise RequestError(404, f"adapter {name!r} is refused: {registry.refused[name]}")
        if name not in registry.entries:
            raise RequestError(
                404, f"no adapter {name!r} in the registry; GET /adapters lists them"
            )
        return registry.entries[name]

    def check_texts(self, texts: Sequence[str]) -> None:
        """Refuse an empty request, an empty text, or more than the limits allow."""
        limits = self.options
        if not texts:
            raise RequestError(422, "texts is empty: send at least one text")
        if len(texts) > limits.max_texts:
            raise RequestError(
                413, f"{len(texts)} texts in one request; the limit is {limits.max_texts}"
            )
        for index, text in enumerate(texts):
            if not text.strip():
                raise RequestError(422, f"texts[{index}] is empty")
            if len(text) > limits.max_chars:
                raise RequestError(
                    413,
                    f"texts[{index}] has {len(text)} characters; the limit is {limits.max_chars}",
                )

    def predict(self, adapter: str, texts: Sequence[str]) -> Future[list[Prediction]]:
        """Check the request and queue it; the future holds one prediction per text."""
        self.entry(adapter)
        self.check_texts(texts)
        return self._thread.predict(adapter, list(texts))

    def adapters(self) -> dict[str, Any]:
        """What `GET /adapters` answers: every entry, which are loaded, and the refused."""
        registry, loaded = self.registry, set(self.pool.names)
        return {
            "base_model": self.options.model,
            "adapters": [
                {**e.describe(), "loaded": e.name in loaded} for e in registry.entries.values()
            ],
            "refused": registry.refused,
        }

    def reload(self) -> Future[Registry]:
        """Rescan the registry (on the model thread); adapters gone or changed leave memory."""
        return self._thread.call(self._rescan)

    def close(self) -> None:
        self._thread.close()

    def _rescan(self) -> Registry:
        registry = self._scan()
        for name in self.pool.names:
            if registry.entries.get(name) != self.registry.entries.get(name):
                self.pool.drop(name)
        self.registry = registry
        self.metrics.loaded.set(len(self.pool.names))
        return registry

    def _scan(self) -> Registry:
        return scan_registry(self.options.adapters, self.base.fits, self.options.max_loaded_bytes)

    def _run_group(self, adapter: str, texts: list[str]) -> list[Prediction]:
        entry = self.entry(adapter)  # a reload may have taken it away since the request came
        loaded = self.pool.get(entry)
        self.metrics.loaded.set(len(self.pool.names))
        loaded.activate()
        return predict(
            loaded.model,
            loaded.encoder,
            texts,
            entry.task,
            entry.labels,
            self.options.max_batch,
        )

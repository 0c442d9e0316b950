"""The serving core without HTTP: registry, shared base model, adapter pool, model thread.

`AdapterService` is what both the uvicorn app and each Ray Serve replica hold. Requests are
checked here (adapter name, input sizes), predictions come back as futures from the model
thread, and `reload` rescans the registry between batches. Causal-LM adapters, and the base
model itself when it is a decoder, generate text (`adaptlab.engine.generation`) on the same
thread, between batches; adapters generating are never evicted or reloaded under them. Chat
templates render in processes of their own (`adaptlab.serve.template_render`), bounded in time
and output, off the event loop and the model thread.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from concurrent.futures import Future
from typing import Any

from adaptlab.checks import shown
from adaptlab.data.encoding import TextEncoder
from adaptlab.data.template_bounds import rendered_chars
from adaptlab.engine.generation import Completion, Seat, TextGenerator
from adaptlab.engine.rows import can_share_rows
from adaptlab.methods.manifest import NAME, Manifest
from adaptlab.methods.state import get_state
from adaptlab.runs.predict import predict
from adaptlab.serve.base import SharedBase
from adaptlab.serve.errors import RequestError, check_unicode
from adaptlab.serve.metrics import ServeMetrics
from adaptlab.serve.options import ServeOptions
from adaptlab.serve.pool import AdapterPool
from adaptlab.serve.prompts import Prompts, base_info
from adaptlab.serve.registry import CAUSAL_LM, Entry, Registry, is_causal_lm, scan_registry
from adaptlab.serve.template_render import ChatTemplates
from adaptlab.serve.worker import ModelThread
from adaptlab.tasks.prediction import Prediction
from adaptlab.tasks.registry import get_task


class AdapterService:
    """Serves every adapter of the registry folder `options.adapters` on `options.model`."""

    def __init__(self, options: ServeOptions) -> None:
        self.options = options
        self.base = SharedBase(options.model, options.device)
        # a --max-length the model cannot take (or a tokenizer that cannot pad) fails here
        TextEncoder(self.base.tokenizer, get_task("regression"), 1, options.max_length)
        self.info = base_info(options.model, self.base.tokenizer)
        self.prompts = Prompts(
            self.base.tokenizer, self.info.window, options.max_chars, options.max_tokens
        )
        self.templates = ChatTemplates(
            self.base.tokenizer, options.max_render_seconds, rendered_chars(self.info.window)
        )
        if self.info.decoder:
            self.templates.start()
        self.registry = self._scan()
        self.pool = AdapterPool(
            self.base, options.max_loaded, options.max_loaded_bytes, options.max_length
        )
        self.metrics = ServeMetrics()
        self.generator = TextGenerator(
            self.base.tokenizer, self._seat, options.max_batch, lambda: self._thread.wake()
        )
        self._thread = ModelThread(
            self._run_group,
            options.max_batch,
            options.max_wait_ms / 1000,
            self.metrics.observe_batch,
            self.generator,
        )

    def entry(self, name: object, listing: str = "GET /adapters") -> Entry:
        """The registry entry called `name`; a RequestError if there is none."""
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise RequestError(
                400,
                f"adapter {shown(name)} is not an adapter name: give a name from {listing} "
                "(letters, digits, '-', '_'), never a path",
            )
        registry = self.registry
        if name in registry.refused:
            raise RequestError(404, f"adapter {name!r} is refused: {registry.refused[name]}")
        if name not in registry.entries:
            raise RequestError(404, f"no adapter {name!r} in the registry; {listing} lists them")
        return registry.entries[name]

    def check_texts(self, texts: Sequence[str]) -> None:
        """Refuse an empty request, an empty text, text that is not valid Unicode, or more
        than the limits allow."""
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
            check_unicode(text, f"texts[{index}]")

    def predict(self, adapter: str, texts: Sequence[str]) -> Future[list[Prediction]]:
        """Check the request and queue it; the future holds one prediction per text."""
        if self.entry(adapter).causal:
            raise RequestError(
                400,
                f"adapter {adapter!r} is a causal-LM adapter, it generates text: ask POST "
                "/v1/completions or /v1/chat/completions",
            )
        self.check_texts(texts)
        return self._thread.predict(adapter, list(texts))

    def generating_model(self, name: object) -> str | None:
        """The adapter a /v1 request's `model` names (None: the base model itself); a
        RequestError if it names nothing that generates text."""
        if name == self.options.model:
            if not self.info.decoder:
                raise RequestError(
                    400, f"the base model {name!r} is not a decoder; it cannot generate text"
                )
            return None
        entry = self.entry(name, "GET /v1/models")
        if not entry.causal:
            raise RequestError(
                400, f"adapter {name!r} is a {entry.task} adapter (it labels text): ask /predict"
            )
        return entry.name

    async def chat_ids(self, name: str | None, messages: list[dict[str, str]]) -> list[int]:
        """The prompt of a chat for `name` (the generating model: an adapter, None for the
        base): rendered by the adapter's own chat template when its manifest has one (the
        template it was trained with), else by the tokenizer's, in a render process."""
        template = (
            None if name is None else self.entry(name, "GET /v1/models").manifest.chat_template
        )
        self.prompts.check_chat(messages, template)
        source = (
            "the chat template" if template is None else f"the chat template of adapter {name!r}"
        )
        return await self.templates.ids(messages, template, source)

    def chat_models(self) -> set[str]:
        """The models of `models()` that take chats: those with a chat template of their own,
        and all of them when the tokenizer has one."""
        if self.base.tokenizer.chat_template:
            return {name for name, _ in self.models()}
        return {
            e.name for e in self.registry.entries.values() if e.causal and e.manifest.chat_template
        }

    def generate(self, job: Completion) -> None:
        """Queue a completion (its model checked by `generating_model`, its prompt and
        sampling by `prompts`); its events come through `job.emit` on the model thread."""
        self.generator.submit(job)

    def models(self) -> list[tuple[str, str | None]]:
        """What `GET /v1/models` lists: (name, the base it runs on, None for the base)."""
        base = self.options.model
        adapters: list[tuple[str, str | None]] = [
            (e.name, base) for e in self.registry.entries.values() if e.causal
        ]
        return [(base, None), *adapters] if self.info.decoder else adapters

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
        self.templates.close()
        self._thread.close()

    def _rescan(self) -> Registry:
        registry = self._scan()
        generating = self.generator.adapters()
        for name in self.pool.names:
            changed = registry.entries.get(name) != self.registry.entries.get(name)
            if changed and name not in generating:  # one generating leaves when it is done
                self.pool.drop(name)
        self.registry = registry
        self.metrics.loaded.set(len(self.pool.names))
        return registry

    def _scan(self) -> Registry:
        registry = scan_registry(self.options.adapters, self._fits, self.options.max_loaded_bytes)
        if self.options.model in registry.entries:  # a request naming it means the base model
            del registry.entries[self.options.model]
            registry.refused[self.options.model] = "its name is the base model's"
        return registry

    def _fits(self, manifest: Manifest) -> str | None:
        if is_causal_lm(manifest) and not self.info.decoder:
            return (
                f"it is a causal-LM adapter and the served base {self.options.model!r} is not a "
                "decoder"
            )
        return self.base.fits(manifest)

    def _seat(self, name: str | None, generating: Collection[str]) -> Seat | None:
        """Where a completion for `name` runs (on the model thread; loads its adapter)."""
        if name is None:
            return Seat(self.base.shared_model(CAUSAL_LM, ()), None, shares_rows=True)
        entry = self.entry(name, "GET /v1/models")  # a reload may have taken it away
        loaded_from = self.pool.loaded(name)
        if loaded_from not in (None, entry) and name in generating:
            return None  # it changed on disk; its new version loads when the old one is done
        loaded = self.pool.get(entry, keep=generating)
        self.metrics.loaded.set(len(self.pool.names))
        if entry.composed:
            return Seat(loaded.model, None, shares_rows=False, fixed=True)
        state = get_state(loaded.model)
        assert state is not None  # the adapter was just loaded onto it
        return Seat(loaded.model, name, shares_rows=can_share_rows(state.adapters, name))

    def _run_group(self, adapter: str, texts: list[str]) -> list[Prediction]:
        entry = self.entry(adapter)  # a reload may have taken it away since the request came
        loaded = self.pool.get(entry, keep=self.generator.adapters())
        self.metrics.loaded.set(len(self.pool.names))
        loaded.activate()
        assert loaded.encoder is not None  # /predict refuses causal-LM adapters
        return predict(
            loaded.model,
            loaded.encoder,
            texts,
            entry.task,
            entry.labels,
            self.options.max_batch,
        )

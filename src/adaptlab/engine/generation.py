"""Text generation for many adapters on one causal LM: continuous batching on the model thread.

A completion joins the running sequences at the next step (`Background.step` of
`adaptlab.serve.worker`): its prompt runs (prefill) into a key-value cache of its own
(`adaptlab.engine.kv`), then every step feeds each running sequence its last token, one
forward pass per lane, and a sequence leaves as soon as it ends. A lane is the sequences
that share a forward pass: on a model, the base model's and every adapter's that acts by a
change at its sites (LoRA, bottleneck adapters) run together, each adapter on its own slice
of rows (`adaptlab.engine.rows.Rows`), as `/predict` runs each adapter on its slice of a batch;
an adapter that rewrites inputs, weights or attention ((IA)3, prefix tuning), a fusion or a
stack runs in a lane of its own. Tokens are picked by `adaptlab.engine.sampling`; a sequence
alone in its lane computes exactly what `model.generate` does.
"""

from __future__ import annotations

import inspect
import threading
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.engine.kv import KVRows, join, joinable, new_cache
from adaptlab.engine.rows import Rows
from adaptlab.engine.sampling import Sampling, StopText, pick
from adaptlab.methods.adapt import active, set_active
from adaptlab.methods.blocks import Composition
from adaptlab.methods.state import get_state


@dataclass(frozen=True)
class Piece:
    """More text of a completion."""

    text: str


@dataclass(frozen=True)
class Finish:
    """The completion ended: "stop" (end of text or a stop string) or "length" (max_tokens).
    `token_ids`: every token drawn, the end-of-text token that ended it included (the text and
    `completion_tokens` leave that one out)."""

    reason: str
    prompt_tokens: int
    completion_tokens: int
    token_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Failure:
    """The completion could not go on."""

    error: BaseException


Event = Piece | Finish | Failure
Emit = Callable[[Event], None]


@dataclass
class Completion:
    """One request for text: the model it names (an adapter, or None for the base model), its
    prompt as token ids, how to pick tokens, and where its events go (called on the model
    thread). Setting `cancelled` (from any thread) ends it at the next step, silently."""

    adapter: str | None
    prompt: list[int]
    sampling: Sampling
    emit: Emit
    cancelled: bool = False


@dataclass(frozen=True)
class Seat:
    """Where a completion runs: the model, and the adapter it activates there (None: the
    base model; `fixed`: a fusion's or stack's own model, whose composition stays as loaded).
    `shares_rows`: it joins the model's mixed lane (`Rows`) instead of a lane of its own."""

    model: nn.Module
    adapter: str | None
    shares_rows: bool
    fixed: bool = False


Place = Callable[[str | None, Collection[str]], Seat | None]
"""The seat of a completion for this model name, given the adapters still generating (which
must stay loaded); None while it cannot run yet (its adapter changed and still generates)."""


@dataclass
class _Row:
    job: Completion
    generator: torch.Generator
    text: StopText
    tokens: list[int] = field(default_factory=list)
    last: int = 0
    done: bool = False

    @property
    def key(self) -> str:
        return self.job.adapter or ""


@dataclass
class _Lane:
    seat: Seat
    rows: list[_Row] = field(default_factory=list)
    kv: KVRows | None = None


class TextGenerator:
    """Runs completions on the model thread, a step at a time (`busy`, `step`)."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        place: Place,
        max_rows: int,
        wake: Callable[[], None],
    ) -> None:
        self.tokenizer = tokenizer
        self._place = place
        self._max_rows = max_rows
        self._wake = wake
        self._inbox: deque[Completion] = deque()
        self._lanes: dict[tuple[object, ...], _Lane] = {}
        self._running: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def submit(self, job: Completion) -> None:
        """Queue `job` (any thread); its events come through `job.emit`."""
        with self._lock:
            self._inbox.append(job)
        self._wake()

    def busy(self) -> bool:
        return bool(self._inbox) or bool(self._lanes)

    def adapters(self) -> frozenset[str]:
        """The adapters generating now (safe to read from any thread)."""
        return self._running

    @torch.no_grad()
    def step(self) -> None:
        """One token for every running sequence, then the queued completions join."""
        for key, lane in list(self._lanes.items()):
            try:
                self._decode(lane)
            except Exception as error:  # a failing forward ends its lane, not the thread
                _fail(lane.rows, error)
                lane.rows = []
            if not lane.rows:
                del self._lanes[key]
        self._admit()
        self._running = frozenset(r.key for lane in self._lanes.values() for r in lane.rows)

    # -- joining -----------------------------------------------------------------------------

    def _admit(self) -> None:
        room = self._max_rows - sum(len(lane.rows) for lane in self._lanes.values())
        with self._lock:
            queued, self._inbox = list(self._inbox), deque()
        waiting: list[Completion] = []
        joining: dict[tuple[object, ...], list[Completion]] = {}
        keep = set(self._running)  # and the adapters placed here, which must stay loaded too
        for job in queued:
            if job.cancelled:
                continue
            if room <= 0:
                waiting.append(job)
                continue
            try:
                seat = self._place(job.adapter, keep)
            except Exception as error:  # an adapter that cannot load fails its request only
                job.emit(Failure(error))
                continue
            if seat is None:
                waiting.append(job)
                continue
            keep.add(job.adapter or "")
            key = self._lane_key(seat, job)
            self._lanes.setdefault(key, _Lane(seat))
            joining.setdefault(key, []).append(job)
            room -= 1
        with self._lock:
            self._inbox.extendleft(reversed(waiting))
        for key, jobs in joining.items():
            lane = self._lanes[key]
            rows = [_Row(j, j.sampling.generator(), StopText(j.sampling.stop)) for j in jobs]
            try:
                self._prefill(lane, sorted(rows, key=lambda r: r.key))
            except Exception as error:  # the newcomers fail; the lane's running rows go on
                _fail(rows, error)
            if not lane.rows:
                del self._lanes[key]

    def _lane_key(self, seat: Seat, job: Completion) -> tuple[object, ...]:
        """Which lane `job` joins: its model's mixed lane, a lane of its adapter, or (a model
        whose cache rows cannot be joined) a lane of its own."""
        if not joinable(seat.model):
            return (id(seat.model), id(job))
        if seat.shares_rows:
            return (id(seat.model),)
        return (id(seat.model), seat.adapter)

    def _prefill(self, lane: _Lane, rows: list[_Row]) -> None:
        model = lane.seat.model
        width = max(len(row.job.prompt) for row in rows)
        pad = self.tokenizer.pad_token_id or 0
        gaps = [width - len(row.job.prompt) for row in rows]
        ids = torch.tensor([[pad] * g + r.job.prompt for g, r in zip(gaps, rows, strict=True)])
        mask = torch.tensor([[0] * gap + [1] * (width - gap) for gap in gaps])
        self._activate(lane.seat, rows)
        out = _forward(
            model,
            input_ids=ids.to(_device(model)),
            attention_mask=mask.to(_device(model)),
            position_ids=(mask.cumsum(dim=1) - 1).clamp(min=0).to(_device(model)),
            past_key_values=new_cache(model),
            use_cache=True,
            logits_to_keep=1,
        )
        fresh = KVRows(out.past_key_values, mask.to(_device(model)))
        self._advance(model, rows, out.logits[:, -1])
        lane.kv = fresh if lane.kv is None else join([lane.kv, fresh])
        lane.rows += rows
        self._settle(lane)

    # -- stepping ----------------------------------------------------------------------------

    def _decode(self, lane: _Lane) -> None:
        self._settle(lane)  # cancelled ones leave first
        if not lane.rows:
            return
        assert lane.kv is not None
        model, kv = lane.seat.model, lane.kv
        self._activate(lane.seat, lane.rows)
        mask = kv.grown()
        out = _forward(
            model,
            input_ids=torch.tensor([[row.last] for row in lane.rows], device=_device(model)),
            attention_mask=mask,
            position_ids=kv.lengths(),
            past_key_values=kv.cache,
            use_cache=True,
        )
        lane.kv = KVRows(out.past_key_values, mask)
        self._advance(model, lane.rows, out.logits[:, -1])
        self._settle(lane)

    def _advance(self, model: nn.Module, rows: Sequence[_Row], logits: torch.Tensor) -> None:
        """Pick each row's next token; send its new text, and its end when it ends."""
        tokens = pick(logits, [r.job.sampling for r in rows], [r.generator for r in rows])
        stops = end_ids(model, self.tokenizer)
        for row, token in zip(rows, tokens, strict=True):
            reason = None
            if token in stops:
                reason = "stop"
            else:
                row.tokens.append(token)
                row.text.update(str(self.tokenizer.decode(row.tokens, skip_special_tokens=True)))
                if row.text.stopped:
                    reason = "stop"
                elif len(row.tokens) >= row.job.sampling.max_tokens:
                    reason = "length"
            row.last, row.done = token, reason is not None
            if row.job.cancelled:
                continue
            piece = row.text.fresh(final=row.done)
            if piece:
                row.job.emit(Piece(piece))
            if reason is not None:
                drawn = (*row.tokens, token) if token in stops else tuple(row.tokens)
                row.job.emit(Finish(reason, len(row.job.prompt), len(row.tokens), drawn))

    def _settle(self, lane: _Lane) -> None:
        """Drop ended and cancelled rows; keep each adapter's rows together, in key order."""
        assert lane.kv is not None
        keep = [i for i, row in enumerate(lane.rows) if not (row.done or row.job.cancelled)]
        order = sorted(keep, key=lambda i: lane.rows[i].key)
        if order != list(range(len(lane.rows))):
            index = torch.tensor(order, dtype=torch.long, device=lane.kv.mask.device)
            lane.kv = lane.kv.take(index) if order else None
            lane.rows = [lane.rows[i] for i in order]

    def _activate(self, seat: Seat, rows: Sequence[_Row]) -> None:
        """Make what `rows` run active on the seat's model: one adapter, or slices."""
        if seat.fixed:
            return
        wanted: Composition | None = seat.adapter
        if seat.shares_rows:
            wanted = _spans(rows)
        if get_state(seat.model) is not None and active(seat.model) != wanted:
            set_active(seat.model, wanted)


def _spans(rows: Sequence[_Row]) -> Rows | None:
    """Each adapter's contiguous rows (rows are in key order; the base model's come first)."""
    spans: list[tuple[str, int, int]] = []
    for index, row in enumerate(rows):
        if not row.key:
            continue
        if spans and spans[-1][0] == row.key:
            spans[-1] = (row.key, spans[-1][1], index + 1)
        else:
            spans.append((row.key, index, index + 1))
    return Rows(spans) if spans else None


def end_ids(model: nn.Module, tokenizer: PreTrainedTokenizerBase) -> frozenset[int]:
    """The tokens that end a text: the model's generation config's (what `generate` stops
    at), else the tokenizer's end-of-text token."""
    config = getattr(model, "generation_config", None)
    found = getattr(config, "eos_token_id", None)
    if found is None:
        found = tokenizer.eos_token_id
    if found is None:
        return frozenset()
    return frozenset([found] if isinstance(found, int) else found)


def _fail(rows: Sequence[_Row], error: Exception) -> None:
    for row in rows:
        if not row.done and not row.job.cancelled:
            row.job.emit(Failure(error))


def _forward(model: nn.Module, **inputs: Any) -> Any:
    """`model(**inputs)` without the optional inputs its forward does not take (ALiBi models
    take no positions; a few architectures cannot keep only the last logits)."""
    taken = inspect.signature(model.forward).parameters
    optional = ("position_ids", "logits_to_keep")
    return model(**{k: v for k, v in inputs.items() if k in taken or k not in optional})


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device

"""The adapters of one model, attached to it the first time an adapter is added.

`AdapterState` coordinates the pieces, each its own module:

- `NamedAdapters` (`adaptlab.methods.named`): the adapters by name, and what a composition of
  them means (blocks answer for themselves, `adaptlab.methods.blocks`);
- `BaseWeights` (`adaptlab.methods.weights`): the pretrained weights and the copies adapters
  own of them, put in place while those adapters run;
- `SiteHooks` (`adaptlab.methods.hooks`) running the `Plan` (`adaptlab.methods.plan`) of the
  active composition, and the hooks the active block asks for (Parallel's batch copies);
- `QuietFront` (`adaptlab.methods.frozen`): the frozen front runs without dropout.

Nothing here re-implements a model's forward; the model's parameter names are untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from adaptlab.backbone.parts import Backbone
from adaptlab.errors import ConfigError
from adaptlab.methods.blocks import Block, Composition
from adaptlab.methods.frozen import QuietFront
from adaptlab.methods.handle import AdaptHandle
from adaptlab.methods.hooks import SiteHooks
from adaptlab.methods.inserted import put_modules, take_modules
from adaptlab.methods.merging import merged_names, set_merged
from adaptlab.methods.named import NamedAdapters
from adaptlab.methods.plan import Plan, make_plan
from adaptlab.methods.weights import BaseWeights
from adaptlab.models.fingerprint import fingerprint

STATE_ATTRIBUTE = "_adaptlab_state"


class AdapterState:
    """Every named adapter of `model`, and which of them run."""

    def __init__(self, model: nn.Module, backbone: Backbone) -> None:
        self.model = model
        self.backbone = backbone
        self.fingerprint = fingerprint(model, exclude=backbone.head)
        self.adapters = NamedAdapters(model, backbone)
        self.units = self.adapters.units
        self.weights = BaseWeights(model)
        self.hooks = SiteHooks(model)
        self.quiet = QuietFront(model, backbone)
        self.active: Composition | None = None
        self.focus: str | None = None
        """The adapter last trained or loaded by itself: `get_handle`'s answer without a name."""
        self._block_hooks: list[RemovableHandle] = []

    @property
    def base_names(self) -> list[str]:
        """Canonical names of the base model's parameters, in model order."""
        return self.weights.names

    @property
    def base_parameter_count(self) -> int:
        return self.weights.parameter_count

    @property
    def head_names(self) -> frozenset[str]:
        """Canonical names of the task head's parameters."""
        return self.adapters.head_names

    @property
    def frozen_blocks(self) -> int:
        """Leading blocks that run without dropout now (see `adaptlab.methods.frozen`)."""
        return self.quiet.blocks

    def base_tensor(self, name: str) -> torch.Tensor:
        """The pretrained value of base parameter `name` (as loaded, before any training)."""
        return self.weights.base_tensor(name)

    def units_in(self, composition: Composition | None) -> list[AdaptHandle]:
        """The adapters (and fusions) that run under `composition`."""
        return self.adapters.units_in(composition)

    # -- adapters in and out ---------------------------------------------------------------

    @contextmanager
    def adding(self) -> Iterator[None]:
        """Around adding an adapter: if it fails on a model with no other, the state leaves."""
        try:
            yield
        except BaseException:
            if not self.units:
                self.detach()
            raise

    def own(self, names: list[str], keep_initial: bool) -> dict[str, nn.Parameter]:
        """An adapter's own tensors for the pretrained weights `names` (`BaseWeights.own`)."""
        return self.weights.own(names, keep_initial)

    def insert(self, handle: AdaptHandle) -> None:
        """Put `handle`'s modules into the model and hook every site and read module."""
        put_modules(self.model, handle)
        self.units[handle.name] = handle
        self.hooks.sync(self.units.values())

    def delete(self, name: str) -> None:
        """Take adapter `name` out of the model (it must not be active)."""
        handle = self.units.pop(name)
        if self.focus == name:
            self.focus = None
        take_modules(self.model, handle)
        self.hooks.sync(self.units.values())
        self.weights.release(handle.owned, {n for u in self.units.values() for n in u.owned})

    def clear(self) -> None:
        """Take every adapter and hook out; the weights that run now stay in place."""
        running = self.adapters.running_tensors(self.active)
        self.hooks.follow(Plan())
        self.active = None
        self.weights.place(running)
        for handle in self.units.values():
            take_modules(self.model, handle)
        self.units.clear()
        self.detach()

    def detach(self) -> None:
        """Remove every hook; the state leaves the model (its adapters must be gone)."""
        self.hooks.sync(self.units.values())
        self._set_block_hooks(None)
        self.quiet.remove()
        object.__delattr__(self.model, STATE_ATTRIBUTE)

    # -- which adapters run ----------------------------------------------------------------

    def activate(self, composition: Composition | None) -> None:
        """Make `composition` the one that runs (None: no adapter runs, the base model does)."""
        self._refuse_while_merged(composition)
        self.adapters.check(composition)
        wanted = self.adapters.running_tensors(composition)
        lost = self.weights.lost(wanted)
        if lost is not None:
            owner = next(u.name for u in self.units.values() if lost in u.owned)
            raise ConfigError(
                f"adapter {owner!r} was made with keep_initial=False and cannot be switched "
                f"off: {lost!r} has no base value left"
            )
        plan = make_plan(composition, self.adapters, self.hooks.sites())
        self.weights.place(wanted)  # nothing changed before this point
        self.hooks.follow(plan)
        self._set_block_hooks(composition)
        self.active = composition
        self.quiet.refresh(self.units_in(composition))

    @contextmanager
    def deactivated(self) -> Iterator[nn.Module]:
        """Inside the block nothing runs: the base model, from the same object."""
        previous = self.active
        self.activate(None)
        try:
            yield self.model
        finally:
            self.activate(previous)

    def train(self, handle: AdaptHandle) -> None:
        """Only `handle`'s tensors train; everything else (other adapters, the base) is frozen."""
        self._refuse_while_merged(self.active)
        self.model.requires_grad_(False)
        for unit in self.units.values():
            for tensor in unit.owned.values():
                tensor.requires_grad_(False)
        self.weights.freeze_bases()
        for tensor in handle.tensors().values():
            tensor.requires_grad_(True)
        self.focus = handle.name
        self.quiet.refresh(self.units_in(self.active))

    def regularization(self) -> torch.Tensor | None:
        """The sum of the active units' regularisers (e.g. AdapterFusion's value penalty)."""
        terms = [
            term
            for unit in self.units_in(self.active)
            for layer in unit.fusion_layers.values()
            if (term := layer.regularization()) is not None
        ]
        return torch.stack(terms).sum() if terms else None

    def merge(self, handle: AdaptHandle, merge: bool) -> None:
        """Fold (merge=True) or take out the mergeable modules of an active adapter."""
        set_merged(self.model, handle, self.units_in(self.active), merge)

    def merged(self) -> list[str]:
        """Names of the adapters with a module merged into the weights."""
        return merged_names(self.units.values())

    def _refuse_while_merged(self, composition: Composition | None) -> None:
        merged = self.merged()
        if merged and composition != self.active:
            raise ConfigError(
                f"adapter {merged[0]!r} is merged into the weights; unmerge it before changing "
                "which adapters run"
            )

    def _set_block_hooks(self, composition: Composition | None) -> None:
        """The hooks the running block asks for on the model (Parallel's), and only those."""
        for hook in self._block_hooks:
            hook.remove()
        block = composition if isinstance(composition, Block) else None
        self._block_hooks = block.hooks(self.adapters) if block is not None else []


def get_state(model: nn.Module) -> AdapterState | None:
    """The adapters attached to `model`, if any."""
    return getattr(model, STATE_ATTRIBUTE, None)


def attach(model: nn.Module, backbone: Backbone) -> AdapterState:
    """The model's adapter state, created on first use."""
    state = get_state(model)
    if state is None:
        state = AdapterState(model, backbone)
        object.__setattr__(model, STATE_ATTRIBUTE, state)
    return state

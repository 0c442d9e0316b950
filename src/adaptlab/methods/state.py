"""The adapters of one model: their modules, one dispatcher per site, the active composition.

`AdapterState` is attached to a model the first time an adapter is added. It owns:

- the site dispatchers: one forward hook per site module, which runs the step the active
  composition asks for at that site (`adaptlab.methods.dispatch`), and one forward pre-hook
  per module whose input an inserted module reads (captured only while needed);
- the pretrained weights adapters train: each adapter has its own copies, and activation puts
  the active adapters' copies in place of the model's weights (the displaced originals are
  kept, so switching everything off gives the base model back, bit for bit);
- for a `Parallel` composition, a pre-hook that copies the batch once per branch and hooks on
  the head modules that run each branch's head on its slice.

Nothing here re-implements a model's forward; the model's parameter names are untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.func import functional_call
from torch.utils.hooks import RemovableHandle

from adaptlab.backbone import Backbone, get_module
from adaptlab.errors import ConfigError
from adaptlab.methods.blocks import Composition, Fuse, Parallel, Stack, composition_names
from adaptlab.methods.dispatch import AdapterStep, FuseStep, ParallelStep, StackStep, Step
from adaptlab.methods.handle import AdaptHandle
from adaptlab.methods.params import INSERTED, parameters_under
from adaptlab.models.fingerprint import fingerprint

STATE_ATTRIBUTE = "_adaptlab_state"

Slot = tuple[nn.Module, str]


class AdapterState:
    """Every named adapter of `model`, and which of them run."""

    def __init__(self, model: nn.Module, backbone: Backbone) -> None:
        self.model = model
        self.backbone = backbone
        self.fingerprint = fingerprint(model, exclude=backbone.head)
        self.units: dict[str, AdaptHandle] = {}
        self.active: Composition | None = None
        self.focus: str | None = None
        """The adapter last trained or loaded by itself: `get_handle`'s answer without a name."""
        self._slots = _parameter_slots(model)
        self.base_parameter_count = sum(_param(slots).numel() for slots in self._slots.values())
        self.head_names = frozenset(parameters_under(model, backbone.head))
        self._originals: dict[str, nn.Parameter | None] = {}
        """Base weights of the slots some adapter owns; None where keep_initial=False took it."""
        self._site_hooks: dict[str, RemovableHandle] = {}
        self._capture_hooks: dict[str, RemovableHandle] = {}
        self._plan: dict[str, tuple[Step, tuple[str, ...]]] = {}
        self._capturing: frozenset[str] = frozenset()
        self._captured: dict[str, torch.Tensor] = {}
        self._parallel_hooks: list[RemovableHandle] = []

    @property
    def base_names(self) -> list[str]:
        """Canonical names of the base model's parameters, in model order."""
        return list(self._slots)

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
        """An adapter's own tensors for the pretrained weights `names`, starting at base values.

        With `keep_initial` they are copies; without, the adapter takes the base tensors
        themselves (no memory spent, but the base model cannot be given back).
        """
        for name in names:  # every check before anything changes
            if name not in self._slots:
                raise ConfigError(f"{name!r} is not a parameter of the base model")
            if name in self._originals and self._originals[name] is None:
                raise ConfigError(
                    f"the base value of {name!r} was given to an adapter made with "
                    "keep_initial=False; start from a fresh base model"
                )
        owned: dict[str, nn.Parameter] = {}
        for name in names:
            base = self._originals.setdefault(name, _param(self._slots[name]))
            assert base is not None
            if keep_initial:
                owned[name] = nn.Parameter(base.detach().clone(), requires_grad=False)
            else:
                owned[name] = base
                self._originals[name] = None
        return owned

    def insert(self, handle: AdaptHandle) -> None:
        """Put `handle`'s modules into the model and hook every site and read module."""
        for site, method, module in handle.modules():
            layer = get_module(self.model, site)
            container = getattr(layer, INSERTED, None)
            if container is None:
                if hasattr(layer, INSERTED):
                    raise ConfigError(f"{site!r} already has an attribute {INSERTED!r}")
                container = nn.ModuleDict()
                layer.add_module(INSERTED, container)
            assert isinstance(container, nn.ModuleDict)
            if handle.name not in container:
                container[handle.name] = nn.ModuleDict()
            modules = container[handle.name]
            assert isinstance(modules, nn.ModuleDict)
            weight = next(layer.parameters())
            modules[method] = module.to(device=weight.device, dtype=weight.dtype)
            if site not in self._site_hooks:
                self._site_hooks[site] = layer.register_forward_hook(self._site_hook(site))
        for insertions in handle.insertions.values():
            for source in {i.reads for i in insertions if i.reads not in (None, i.site)}:
                if source is not None and source not in self._capture_hooks:
                    hook = self._capture_hook(source)
                    module = get_module(self.model, source)
                    self._capture_hooks[source] = module.register_forward_pre_hook(hook)
        self.units[handle.name] = handle

    def delete(self, name: str) -> None:
        """Take adapter `name` out of the model (it must not be active)."""
        handle = self.units.pop(name)
        if self.focus == name:
            self.focus = None
        for site, _, _ in handle.modules():
            layer = get_module(self.model, site)
            container = getattr(layer, INSERTED)
            if name in container:
                del container[name]
            if len(container) == 0:
                delattr(layer, INSERTED)
                self._site_hooks.pop(site).remove()
        still_read = {
            i.reads for u in self.units.values() for ins in u.insertions.values() for i in ins
        }
        for source in [s for s in self._capture_hooks if s not in still_read]:
            self._capture_hooks.pop(source).remove()
        owned_elsewhere = {n for u in self.units.values() for n in u.owned}
        for owned in handle.owned:
            if owned not in owned_elsewhere:
                original = self._originals.pop(owned)
                if original is not None:
                    self._put(owned, original)

    def clear(self) -> None:
        """Take every adapter and hook out; the weights that run now stay in place."""
        running = self._wanted_tensors(self.active)
        self._plan, self.active = {}, None
        for name, original in self._originals.items():
            target = running.get(name, original)
            if target is not None:
                self._put(name, target)
        for handle in self.units.values():
            for site, _, _ in handle.modules():
                layer = get_module(self.model, site)
                if hasattr(layer, INSERTED):
                    delattr(layer, INSERTED)
        self.units.clear()
        self.detach()

    def detach(self) -> None:
        """Remove every hook; the state leaves the model (its adapters must be gone)."""
        for hook in [*self._site_hooks.values(), *self._capture_hooks.values()]:
            hook.remove()
        self._set_parallel(None)
        object.__delattr__(self.model, STATE_ATTRIBUTE)

    # -- which adapters run ----------------------------------------------------------------

    def activate(self, composition: Composition | None) -> None:
        """Make `composition` the one that runs (None: no adapter runs, the base model does)."""
        self._refuse_while_merged(composition)
        self.check(composition)
        wanted = self._wanted_tensors(composition)
        for name, original in self._originals.items():
            if name not in wanted and original is None:
                owner = next(u.name for u in self.units.values() if name in u.owned)
                raise ConfigError(
                    f"adapter {owner!r} was made with keep_initial=False and cannot be switched "
                    f"off: {name!r} has no base value left"
                )
        steps = {site: self._step(composition, site) for site in self._site_hooks}
        for name, original in self._originals.items():  # nothing changed before this point
            target = wanted.get(name, original)
            assert target is not None
            self._put(name, target)
        self._plan = {
            site: (step, tuple(dict.fromkeys(step.reads())))
            for site, step in steps.items()
            if step is not None
        }
        self._capturing = frozenset(
            source for site, (_, reads) in self._plan.items() for source in reads if source != site
        )
        self._set_parallel(composition if isinstance(composition, Parallel) else None)
        self.active = composition

    def check(self, composition: Composition | None) -> None:
        """Refuse, in one line, a composition this model cannot run."""
        for name in composition_names(composition):
            if name not in self.units:
                known = ", ".join(n for n, u in self.units.items() if not u.is_fusion) or "none"
                raise ConfigError(f"no adapter named {name!r} on this model; adapters: {known}")
            if self.units[name].is_fusion:
                raise ConfigError(f"{name!r} is a fusion; activate {Fuse(*self.units[name].fused)}")
        for fuse in _fuse_blocks(composition):
            for child in fuse.children:
                self._refuse_base_weights(child, "Fuse")
            self.fusion_of(fuse)
        if isinstance(composition, Parallel):
            for name in composition_names(composition):
                self._refuse_base_weights(name, "Parallel")
            shapes = {
                tuple(tuple(p.shape) for p in self._head_tensors(b).values())
                for b in composition.children
            }
            if len(shapes) > 1:
                raise ConfigError(
                    f"{composition}: the branches' heads have different shapes; Parallel needs "
                    "heads of the same number of labels"
                )

    def check_fusable(self, fuse: Fuse) -> None:
        """`fuse`'s adapters exist, may be fused, and have no fusion layers yet."""
        for child in fuse.children:
            self.check(child)
            self._refuse_base_weights(child, "Fuse")
        for unit in self.units.values():
            if unit.fused == fuse.children:
                raise ConfigError(f"{fuse} already has fusion layers ({unit.name!r})")

    def fusion_of(self, fuse: Fuse) -> AdaptHandle:
        """The fusion trained over exactly `fuse`'s adapters, in that order."""
        for unit in self.units.values():
            if unit.fused == fuse.children:
                return unit
        raise ConfigError(f"no fusion layers for {fuse} on this model; add them with add_fusion")

    def units_in(self, composition: Composition | None) -> list[AdaptHandle]:
        """The adapters (and fusions) that run under `composition`."""
        units = [self.units[n] for n in composition_names(composition)]
        return units + [self.fusion_of(f) for f in _fuse_blocks(composition)]

    def head_owner(self, composition: Composition | None) -> AdaptHandle | None:
        """Whose head runs: the adapter, the fusion of a Fuse, or a Stack's top-most head."""
        if composition is None:
            return None
        if isinstance(composition, str | Fuse):
            unit = self.units[composition] if isinstance(composition, str) else None
            unit = unit or self.fusion_of(composition)  # type: ignore[arg-type]
            return unit if self.head_names & set(unit.owned) else None
        if isinstance(composition, Stack):
            for child in reversed(composition.children):
                owner = self.head_owner(child)
                if owner is not None:
                    return owner
            return None
        return self.head_owner(composition.children[0])

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
        for original in self._originals.values():
            if original is not None:
                original.requires_grad_(False)
        for tensor in handle.tensors().values():
            tensor.requires_grad_(True)
        self.focus = handle.name

    def regularization(self) -> torch.Tensor | None:
        """The sum of the active units' regularisers (e.g. AdapterFusion's value penalty)."""
        terms = [
            term
            for unit in self.units_in(self.active)
            for layer in unit.fusion_layers.values()
            if (term := layer.regularization()) is not None
        ]
        return torch.stack(terms).sum() if terms else None

    # -- merging ---------------------------------------------------------------------------

    def merge(self, handle: AdaptHandle, merge: bool) -> None:
        """Fold (merge=True) or take out the mergeable modules of an active adapter."""
        if handle not in self.units_in(self.active):
            raise ConfigError(f"merge: adapter {handle.name!r} is not active")
        mergeable = [
            (i.site, i.module)
            for ins in handle.insertions.values()
            for i in ins
            if i.module.mergeable
        ]
        if not mergeable:
            raise ConfigError(
                f"adapter {handle.name!r} ({'+'.join(handle.method_names)}) has nothing to merge; "
                "mergeable methods: lora"
            )
        others = {
            site
            for u in self.units_in(self.active)
            if u is not handle
            for site, _, _ in u.modules()
        }
        for site, module in mergeable:
            if site in others:
                raise ConfigError(
                    f"merge: another active adapter also acts at {site!r}; merge needs it alone"
                )
            if module.merged != merge:
                layer = get_module(self.model, site)
                (module.merge_into if merge else module.unmerge_from)(layer)
                module.merged = merge

    def merged(self) -> list[str]:
        """Names of the adapters with a module merged into the weights."""
        return [
            u.name
            for u in self.units.values()
            if any(i.module.merged for ins in u.insertions.values() for i in ins)
        ]

    def base_tensor(self, name: str) -> torch.Tensor:
        """The pretrained value of base parameter `name` (as loaded, before any training)."""
        original = self._originals.get(name, _param(self._slots[name]))
        if original is None:
            raise ConfigError(f"{name!r} has no base value left (keep_initial=False)")
        return original

    # -- internals -------------------------------------------------------------------------

    def _refuse_while_merged(self, composition: Composition | None) -> None:
        merged = self.merged()
        if merged and composition != self.active:
            raise ConfigError(
                f"adapter {merged[0]!r} is merged into the weights; unmerge it before changing "
                "which adapters run"
            )

    def _refuse_base_weights(self, name: str | Stack, block: str) -> None:
        for unit in (self.units[n] for n in composition_names(name)):
            base = set(unit.owned) - self.head_names
            groups = [g for g, names in unit.groups.items() if base & set(names)]
            if groups:
                raise ConfigError(
                    f"{block}: adapter {unit.name!r} trains pretrained weights "
                    f"({', '.join(groups)}), which one forward cannot hold per adapter; {block} "
                    "takes adapters made of "
                    "inserted modules only (e.g. houlsby with train_norms=false, pfeiffer, lora)"
                )

    def _head_tensors(self, composition: Composition) -> dict[str, nn.Parameter]:
        owner = self.head_owner(composition)
        return {n: t for n, t in (owner.owned if owner else {}).items() if n in self.head_names}

    def _wanted_tensors(self, composition: Composition | None) -> dict[str, nn.Parameter]:
        """Slot name -> the tensor `composition` puts there (unlisted slots get the base)."""
        wanted: dict[str, nn.Parameter] = {}
        owners: dict[str, str] = {}
        for unit in self.units_in(composition):
            for name, tensor in unit.owned.items():
                if name in self.head_names:
                    continue
                if name in wanted:
                    raise ConfigError(
                        f"adapters {owners[name]!r} and {unit.name!r} both train {name!r}; "
                        "they cannot run together"
                    )
                wanted[name], owners[name] = tensor, unit.name
        if composition is not None:
            wanted.update(self._head_tensors(composition))
        return wanted

    def _put(self, name: str, tensor: nn.Parameter) -> None:
        slots = self._slots[name]
        current = _param(slots)
        if current is tensor:
            return
        if tensor.device != current.device or tensor.dtype != current.dtype:
            tensor.data = tensor.data.to(device=current.device, dtype=current.dtype)
        for module, attribute in slots:
            setattr(module, attribute, tensor)

    def _step(self, composition: Composition | None, site: str) -> Step | None:
        if composition is None:
            return None
        if isinstance(composition, str):
            modules = tuple(
                (i.module, i.reads)
                for ins in self.units[composition].insertions.values()
                for i in ins
                if i.site == site
            )
            return AdapterStep(modules) if modules else None
        children = tuple(self._step(child, site) for child in composition.children)
        if all(child is None for child in children):
            return None
        if isinstance(composition, Stack):
            present = tuple(c for c in children if c is not None)
            return present[0] if len(present) == 1 else StackStep(present)
        if isinstance(composition, Fuse):
            fusion = self.fusion_of(composition)
            if site not in fusion.fusion_layers:
                raise ConfigError(f"{composition}: its fusion has no layer at {site!r}")
            return FuseStep(children, fusion.fusion_layers[site])
        return ParallelStep(children)

    def _site_hook(self, site: str) -> Any:
        def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
            planned = self._plan.get(site)
            if planned is None:
                return None
            step, reads = planned
            inputs = {r: args[0] if r == site else self._captured.pop(r) for r in reads}
            return step.run(output, inputs)

        return hook

    def _capture_hook(self, source: str) -> Any:
        def hook(module: nn.Module, args: tuple[Any, ...]) -> None:
            if source in self._capturing:
                self._captured[source] = args[0]

        return hook

    def _set_parallel(self, parallel: Parallel | None) -> None:
        for hook in self._parallel_hooks:
            hook.remove()
        self._parallel_hooks = []
        if parallel is None:
            return
        copies = len(parallel.children)
        self._parallel_hooks.append(
            self.model.register_forward_pre_hook(_copy_batch(copies), with_kwargs=True)
        )
        heads = [self._head_tensors(branch) for branch in parallel.children]
        for module_name in self.backbone.head:
            prefix = f"{module_name}."
            local = [
                {n.removeprefix(prefix): t for n, t in head.items() if n.startswith(prefix)}
                for head in heads
            ]
            module = get_module(self.model, module_name)
            self._parallel_hooks.append(module.register_forward_hook(_per_branch(local)))


def _param(slots: list[Slot]) -> nn.Parameter:
    module, attribute = slots[0]
    return getattr(module, attribute)  # type: ignore[no-any-return]


def _parameter_slots(model: nn.Module) -> dict[str, list[Slot]]:
    """Canonical parameter name -> every (module, attribute) holding that tensor (ties)."""
    canonical: dict[int, str] = {}
    slots: dict[str, list[Slot]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        key = canonical.setdefault(id(param), name)
        path, _, attribute = name.rpartition(".")
        slot = (get_module(model, path), attribute)
        places = slots.setdefault(key, [])
        if not any(m is slot[0] and a == attribute for m, a in places):
            places.append(slot)
    return slots


def _fuse_blocks(composition: Composition | None) -> list[Fuse]:
    if composition is None or isinstance(composition, str):
        return []
    if isinstance(composition, Fuse):
        return [composition]
    return [f for child in composition.children for f in _fuse_blocks(child)]


def _copy_batch(copies: int) -> Any:
    """A pre-hook that repeats every batch-sized tensor argument `copies` times along dim 0."""

    def hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        tensors = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)]
        if not tensors:
            return None
        batch = tensors[0].shape[0] if tensors[0].dim() else None

        def copy(value: Any) -> Any:
            if isinstance(value, torch.Tensor) and value.dim() and value.shape[0] == batch:
                return value.repeat(copies, *([1] * (value.dim() - 1)))
            return value

        return tuple(copy(a) for a in args), {k: copy(v) for k, v in kwargs.items()}

    return hook


def _per_branch(heads: list[dict[str, nn.Parameter]]) -> Any:
    """A hook that runs the head module once per branch slice, with that branch's tensors."""

    running = False

    def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
        nonlocal running
        if running:  # the per-branch calls below come through this hook too
            return None
        count = len(heads)
        sliced = [a.chunk(count) if isinstance(a, torch.Tensor) else None for a in args]
        outputs = []
        running = True
        try:
            for i, tensors in enumerate(heads):
                branch = tuple(
                    s[i] if s is not None else a for s, a in zip(sliced, args, strict=True)
                )
                moved = {
                    n: t.to(device=output.device, dtype=output.dtype) for n, t in tensors.items()
                }
                outputs.append(functional_call(module, moved, branch))
        finally:
            running = False
        return torch.cat(outputs)

    return hook


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

"""The hooks through which inserted modules act, one set per kind of site (`adaptlab.methods.site`).

- output sites: a forward hook runs the plan's step for the site (one dispatcher per site), and
  a forward pre-hook on each module whose input a step reads captures it while needed;
- input sites: a pre-hook rewrites the site's input;
- weight sites: a pair of hooks put a replaced weight in place while the site runs;
- attention sites: the attention interface's prefixes (`adaptlab.methods.attention`);
- a pre-hook on the model for modules that read its call.

`SiteHooks.sync` keeps exactly the hooks the adapters' modules need; `follow` makes a plan
(`adaptlab.methods.plan`) the one they run. Nothing here re-implements a model's forward.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Iterable
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from adaptlab.backbone.parts import get_module
from adaptlab.methods.attention import attention_config, point, set_prefixes
from adaptlab.methods.handle import AdaptHandle
from adaptlab.methods.plan import Plan
from adaptlab.methods.site import ATTENTION, INPUT, OUTPUT, WEIGHT, Insertion, SiteModule


class SiteHooks:
    """The hooks on one model's sites, and the plan they follow."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self._site_hooks: dict[str, RemovableHandle] = {}
        self._capture_hooks: dict[str, RemovableHandle] = {}
        self._input_hooks: dict[str, RemovableHandle] = {}
        self._weight_hooks: dict[str, list[RemovableHandle]] = {}
        self._call_hook: RemovableHandle | None = None
        self._attention_sites: list[str] = []
        self._plan = Plan()
        self._captured: dict[str, torch.Tensor] = {}

    def sites(self) -> dict[str, list[str]]:
        """The hooked sites of each kind."""
        return {
            OUTPUT: list(self._site_hooks),
            INPUT: list(self._input_hooks),
            WEIGHT: list(self._weight_hooks),
            ATTENTION: list(self._attention_sites),
        }

    def follow(self, plan: Plan) -> None:
        """Make `plan` what the hooks run (an empty `Plan()`: nothing)."""
        self._plan = plan
        sites = self._attention_sites
        set_prefixes(
            [get_module(self.model, s) for s in sites],
            {get_module(self.model, s): p for s, p in plan.prefixes.items()},
        )
        point(self._attention_configs(sites), wrapped=bool(plan.prefixes))

    def sync(self, units: Iterable[AdaptHandle]) -> None:
        """Exactly the hooks `units` need: added for new sites, removed for sites left."""
        insertions = [i for u in units for ins in u.insertions.values() for i in ins]
        outputs, inputs = _sites(insertions, OUTPUT), _sites(insertions, INPUT)
        weights, prefixes = _sites(insertions, WEIGHT), _sites(insertions, ATTENTION)
        sources = {
            i.reads
            for i in insertions
            if i.module.acts_on == OUTPUT and i.reads is not None and i.reads != i.site
        }
        _sync(self._site_hooks, outputs, self._add_site_hook)
        _sync(self._capture_hooks, sources, self._add_capture_hook)
        _sync(self._input_hooks, inputs, self._add_input_hook)
        for site in [s for s in self._weight_hooks if s not in weights]:
            for hook in self._weight_hooks.pop(site):
                hook.remove()
        for site in [s for s in weights if s not in self._weight_hooks]:
            self._weight_hooks[site] = self._add_weight_hooks(site)
        observing = any(m.sees_model_call for ms in outputs.values() for m in ms)
        if observing and self._call_hook is None:
            self._call_hook = self._add_call_hook()
        elif not observing and self._call_hook is not None:
            self._call_hook.remove()
            self._call_hook = None
        left = [s for s in self._attention_sites if s not in prefixes]
        set_prefixes([get_module(self.model, s) for s in left], {})
        if left and not prefixes:
            point(self._attention_configs(left), wrapped=False)
        self._attention_sites = list(prefixes)

    def _add_site_hook(self, site: str) -> RemovableHandle:
        def hook(
            module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any
        ) -> Any:
            planned = self._plan.steps.get(site)
            if planned is None:
                return None
            step, reads = planned
            inputs = {
                r: _first_input(args, kwargs) if r == site else self._captured.pop(r) for r in reads
            }
            if isinstance(output, tuple | list):  # a block's (hidden states, ...)
                return type(output)((step.run(output[0], inputs), *output[1:]))
            return step.run(output, inputs)

        return get_module(self.model, site).register_forward_hook(hook, with_kwargs=True)

    def _add_capture_hook(self, source: str) -> RemovableHandle:
        def hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if source in self._plan.capturing:
                self._captured[source] = _first_input(args, kwargs)

        return get_module(self.model, source).register_forward_pre_hook(hook, with_kwargs=True)

    def _add_input_hook(self, site: str) -> RemovableHandle:
        def hook(module: nn.Module, args: tuple[Any, ...]) -> Any:
            modules = [m for m in self._plan.inputs.get(site, ()) if not m.merged]
            if not modules or not args:
                return None
            x = args[0]
            for rewriting in modules:
                x = rewriting.rewrite(x)
            return (x, *args[1:])

        return get_module(self.model, site).register_forward_pre_hook(hook)

    def _add_weight_hooks(self, site: str) -> list[RemovableHandle]:
        """Put each active weight module's weight in place while the site runs, then the
        parameter back (also when the forward fails); merged modules are in it already."""
        displaced: list[tuple[str, nn.Parameter]] = []

        def before(module: nn.Module, args: tuple[Any, ...]) -> None:
            modules = [m for m in self._plan.weights.get(site, ()) if not m.merged]
            if not modules:
                return
            name = modules[0].parameter
            original = module._parameters[name]
            assert original is not None
            weight: torch.Tensor = original
            for replacing in modules:
                weight = replacing.replace_weight(weight)
            if weight is not original:
                displaced.append((name, original))
                module._parameters[name] = weight  # type: ignore[assignment]

        def after(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            if displaced and module._parameters[displaced[-1][0]] is not displaced[-1][1]:
                name, original = displaced.pop()
                module._parameters[name] = original

        layer = get_module(self.model, site)
        return [
            layer.register_forward_pre_hook(before),
            layer.register_forward_hook(after, always_call=True),
        ]

    def _add_call_hook(self) -> RemovableHandle:
        signature = inspect.signature(self.model.forward)

        def hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if self._plan.calls:
                arguments = signature.bind_partial(*args, **kwargs).arguments
                for observer in self._plan.calls:
                    observer.model_call(arguments)

        return self.model.register_forward_pre_hook(hook, with_kwargs=True)

    def _attention_configs(self, sites: list[str]) -> list[Any]:
        """The configs whose attention implementation the modules at `sites` look up."""
        configs = [attention_config(get_module(self.model, s), self.model) for s in sites]
        return list({id(c): c for c in configs}.values())


def _sites(insertions: Iterable[Insertion], kind: str) -> dict[str, list[SiteModule]]:
    """Site -> every inserted module of `kind` there."""
    sites: dict[str, list[SiteModule]] = {}
    for i in insertions:
        if i.module.acts_on == kind:
            sites.setdefault(i.site, []).append(i.module)
    return sites


def _first_input(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A module's main input: its first positional argument, or its `hidden_states`."""
    if args:
        return args[0]
    return kwargs.get("hidden_states", next(iter(kwargs.values()), None))


def _sync(
    hooks: dict[str, RemovableHandle],
    wanted: Collection[str],
    make: Callable[[str], RemovableHandle],
) -> None:
    """Remove the hooks of names no longer `wanted`, add `make(name)` for new ones."""
    for name in [n for n in hooks if n not in wanted]:
        hooks.pop(name).remove()
    for name in [n for n in wanted if n not in hooks]:
        hooks[name] = make(name)

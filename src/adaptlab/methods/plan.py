"""What runs where for one composition: the plan the site hooks follow.

A plan is built (`make_plan`) each time the active composition changes, before anything in
the model changes, so a composition that cannot run is refused with the model untouched. It
holds, per kind of site (`adaptlab.methods.site`), what runs there: the step at each output
site, and the active input, weight and attention modules in composition order (a Stack's
bottom adapter first), plus the modules that see the model's call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from adaptlab.methods.blocks import Composition, composition_names
from adaptlab.methods.dispatch import Step
from adaptlab.methods.named import NamedAdapters
from adaptlab.methods.site import (
    ATTENTION,
    INPUT,
    OUTPUT,
    WEIGHT,
    AttentionModule,
    InputModule,
    SiteModule,
    WeightModule,
)

Kind = TypeVar("Kind", bound=SiteModule)


@dataclass(frozen=True)
class Plan:
    """Per site, what the active composition runs there (empty: nothing runs)."""

    steps: Mapping[str, tuple[Step, tuple[str, ...]]] = field(default_factory=dict)
    """Output site -> its step and the modules whose input the step reads."""
    capturing: frozenset[str] = frozenset()
    """Modules whose input a step reads, other than its own site's."""
    inputs: Mapping[str, tuple[InputModule, ...]] = field(default_factory=dict)
    weights: Mapping[str, tuple[WeightModule, ...]] = field(default_factory=dict)
    prefixes: Mapping[str, tuple[AttentionModule, ...]] = field(default_factory=dict)
    """Attention site -> its prefix modules (sites with none left out)."""
    calls: tuple[SiteModule, ...] = ()
    """Modules that see the arguments of the model's call."""


def make_plan(
    composition: Composition | None,
    adapters: NamedAdapters,
    sites: Mapping[str, Iterable[str]],
) -> Plan:
    """The plan of `composition` over the hooked `sites` of each kind."""
    steps = {}
    for site in sites[OUTPUT]:
        step = adapters.step(composition, site)
        if step is not None:
            steps[site] = (step, tuple(dict.fromkeys(step.reads())))
    capturing = frozenset(
        source for site, (_, reads) in steps.items() for source in reads if source != site
    )
    modules = [
        insertion
        for name in composition_names(composition)
        for insertions in adapters.units[name].insertions.values()
        for insertion in insertions
    ]

    def ordered(site: str, kind: type[Kind]) -> tuple[Kind, ...]:
        return tuple(i.module for i in modules if i.site == site and isinstance(i.module, kind))

    prefixes = {site: ordered(site, AttentionModule) for site in sites[ATTENTION]}
    return Plan(
        steps=steps,
        capturing=capturing,
        inputs={site: ordered(site, InputModule) for site in sites[INPUT]},
        weights={site: ordered(site, WeightModule) for site in sites[WEIGHT]},
        prefixes={site: found for site, found in prefixes.items() if found},
        calls=tuple(i.module for i in modules if i.module.sees_model_call),
    )

"""The named adapters of one model, and what a composition of them means on it.

`NamedAdapters` answers, for a composition (an adapter's name or a block): whether this model
can run it, which units run (adapters and fusions), whose head runs, which pretrained-weight
copies go in place, and what runs at each site. A name it answers itself; a block answers
for itself (`adaptlab.methods.blocks`), asking back for its children.
"""

from __future__ import annotations

from torch import nn

from adaptlab.backbone.parts import Backbone, get_module
from adaptlab.errors import ConfigError
from adaptlab.methods.blocks import Block, Composition, Fuse, composition_names
from adaptlab.methods.dispatch import AdapterStep, Step
from adaptlab.methods.handle import AdaptHandle
from adaptlab.methods.params import head_parameters
from adaptlab.methods.site import OUTPUT


class NamedAdapters:
    """Adapters (and fusions) by name, in the order they were added; blocks ask them about
    their children (`adaptlab.methods.blocks.Adapters`)."""

    def __init__(self, model: nn.Module, backbone: Backbone) -> None:
        self.model = model
        self.head_modules = tuple(backbone.head)
        self.head_names = frozenset(head_parameters(model, backbone.head))
        self.units: dict[str, AdaptHandle] = {}

    def alone(self, unit: AdaptHandle) -> Composition:
        """What runs when `unit` runs by itself: its name, or for a fusion the Fuse it mixes."""
        return Fuse(*unit.fused) if unit.is_fusion else unit.name

    def check(self, composition: Composition | None) -> None:
        """Refuse, in one line, a composition this model cannot run."""
        for name in composition_names(composition):
            if name not in self.units:
                known = ", ".join(n for n, u in self.units.items() if not u.is_fusion) or "none"
                raise ConfigError(f"no adapter named {name!r} on this model; adapters: {known}")
            if self.units[name].is_fusion:
                raise ConfigError(f"{name!r} is a fusion; activate {self.alone(self.units[name])}")
        if isinstance(composition, Block):
            composition.check(self)

    def units_in(self, composition: Composition | None) -> list[AdaptHandle]:
        """The adapters (and fusions) that run under `composition`."""
        units = [self.units[n] for n in composition_names(composition)]
        return units + (composition.own_units(self) if isinstance(composition, Block) else [])

    def step(self, composition: Composition | None, site: str) -> Step | None:
        """What `composition` runs at output site `site` (None: nothing)."""
        if composition is None:
            return None
        if isinstance(composition, Block):
            return composition.step(site, self)
        modules = tuple(
            (i.module, i.reads)
            for ins in self.units[composition].insertions.values()
            for i in ins
            if i.site == site and i.module.acts_on == OUTPUT
        )
        return AdapterStep(modules, get_module(self.model, site)) if modules else None

    def head_owner(self, composition: Composition | None) -> AdaptHandle | None:
        """Whose head runs: an adapter's own, or what a block says."""
        if composition is None:
            return None
        if isinstance(composition, Block):
            return composition.head_owner(self)
        return self.with_head(self.units[composition])

    def with_head(self, unit: AdaptHandle) -> AdaptHandle | None:
        """`unit` if it has its own head, else None."""
        return unit if self.head_names & set(unit.owned) else None

    def head_tensors(self, composition: Composition) -> dict[str, nn.Parameter]:
        """The head tensors that run under `composition`, by parameter name."""
        owner = self.head_owner(composition)
        return {n: t for n, t in (owner.owned if owner else {}).items() if n in self.head_names}

    def running_tensors(self, composition: Composition | None) -> dict[str, nn.Parameter]:
        """Base weight name -> the tensor `composition` puts there (unlisted ones: the base)."""
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
            wanted.update(self.head_tensors(composition))
        return wanted

    def require_separable(self, composition: Composition, block: str) -> None:
        """Refuse adapters in `composition` that `block` cannot run one per branch: those
        that train pretrained weights or act on more than a change at each site."""
        units = [self.units[n] for n in composition_names(composition)]
        for unit in units:
            base = set(unit.owned) - self.head_names
            groups = [g for g, names in unit.groups.items() if base & set(names)]
            if groups:
                raise ConfigError(
                    f"{block}: adapter {unit.name!r} trains pretrained weights "
                    f"({', '.join(groups)}), which one forward cannot hold per adapter; {block} "
                    "takes adapters made of "
                    "inserted modules only (e.g. houlsby with train_norms=false, pfeiffer, lora)"
                )
        for unit in units:
            kinds = {
                method
                for method, insertions in unit.insertions.items()
                for i in insertions
                if not i.module.fusable
            }
            if kinds:
                raise ConfigError(
                    f"{block}: adapter {unit.name!r} ({', '.join(sorted(kinds))}) acts on more "
                    f"than a change at each site (inputs, weights, attention keys, a side "
                    f"network), which {block} cannot combine per adapter; use it alone or in a "
                    "Stack"
                )

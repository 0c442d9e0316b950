"""The handle of one named adapter (or fusion) on a model: what it inserted, what it trains."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import nn

from adaptlab.backbone.overrides import BackboneOverrides
from adaptlab.backbone.parts import Backbone
from adaptlab.methods.config import MethodConfig
from adaptlab.methods.fusion import FusionLayer
from adaptlab.methods.params import inserted_name
from adaptlab.methods.scale import TrainingScale
from adaptlab.methods.site import Insertion, SiteModule

HEAD_GROUP = "head"


class StateView(Protocol):
    """What a handle reads from the adapter state of its model (`AdapterState`)."""

    @property
    def model(self) -> nn.Module: ...

    @property
    def fingerprint(self) -> str: ...

    @property
    def base_parameter_count(self) -> int: ...

    @property
    def units(self) -> Mapping[str, AdaptHandle]: ...

    def base_tensor(self, name: str) -> torch.Tensor:
        """The pretrained value of base parameter `name`."""

    def deactivated(self) -> AbstractContextManager[nn.Module]:
        """A block inside which no adapter runs."""


@dataclass(eq=False)
class AdaptHandle:
    """One named adapter on one model: its methods, inserted modules and trained tensors.

    An adapter's tensors are of two kinds. Inserted modules live inside the model (as
    ``<site>.adaptlab.<adapter>.<method>.*``) and act through the site dispatchers. Pretrained
    weights the adapter trains (the head, norms, biases, everything for `full`) are the
    adapter's own copies (`owned`), put in place of the model's weights while the adapter is
    active and taken out again when it is not.
    """

    name: str
    state: StateView = field(repr=False)
    backbone: Backbone
    configs: tuple[MethodConfig, ...]
    overrides: BackboneOverrides
    train_head: bool
    seed: int
    insertions: dict[str, list[Insertion]]  # method -> its inserted modules
    owned: dict[str, nn.Parameter]  # canonical base name -> this adapter's tensor
    groups: dict[str, list[str]]  # group -> names of the tensors that train
    fused: tuple[str, ...] = ()
    """For a fusion: the adapters it fuses, in order."""
    fusion_layers: dict[str, FusionLayer] = field(default_factory=dict)
    """For a fusion: its layer at each site."""
    no_dropout: tuple[str, ...] = ()
    """Modules that run without dropout while this adapter runs (see `MethodResult`)."""
    inserted_initial: dict[str, torch.Tensor] | None = field(default=None, repr=False)
    training_scale: TrainingScale | None = None
    """How the adapter was trained (precision, base dtype, quantisation), when the run that
    trained it said so (`record_training_scale`); its manifest's `scale`."""
    chat_template: str | None = None
    """The chat template the adapter is trained with (`record_chat_template`); its manifest's
    `chat_template`."""

    @property
    def model(self) -> nn.Module:
        return self.state.model

    @property
    def base_fingerprint(self) -> str:
        return self.state.fingerprint

    @property
    def is_fusion(self) -> bool:
        return bool(self.fused)

    @property
    def method_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.configs)

    def modules(self) -> Iterator[tuple[str, str, nn.Module]]:
        """(site, method, module) of everything this adapter inserted."""
        for method, insertions in self.insertions.items():
            for insertion in insertions:
                yield insertion.site, method, insertion.module
        for site, layer in self.fusion_layers.items():
            yield site, "fusion", layer

    def inserted_tensors(self) -> dict[str, nn.Parameter]:
        """Model-absolute name -> parameter, for every inserted module's parameter."""
        return {
            f"{inserted_name(site, self.name, method)}.{n}": p
            for site, method, module in self.modules()
            for n, p in module.named_parameters()
        }

    def tensors(self) -> dict[str, nn.Parameter]:
        """Every tensor this adapter trains, by the name it has in the model when active."""
        tensors = {**self.inserted_tensors(), **self.owned}
        return {n: tensors[n] for n in self.trainable_names}

    def saved_tensors(self) -> dict[str, torch.Tensor]:
        """What `save_adapter` writes, by model name: each inserted module's saved form (a
        reparameterisation folded away) and the adapter's copies of pretrained weights."""
        inserted = {
            f"{inserted_name(site, self.name, method)}.{n}": t
            for site, method, module in self.modules()
            for n, t in (
                module.saved_tensors()
                if isinstance(module, SiteModule)
                else {n: p.detach() for n, p in module.named_parameters()}
            ).items()
        }
        return {**inserted, **{n: t.detach() for n, t in self.owned.items()}}

    @property
    def saved_configs(self) -> tuple[MethodConfig, ...]:
        """The configs the saved form loads with (see `MethodConfig.folded`)."""
        return tuple(c.folded() for c in self.configs)

    def record_training_scale(
        self, *, precision: str, base_dtype: str, quantize: str | None = None
    ) -> None:
        """Say how this adapter is trained, for its manifest: `precision` and `base_dtype` one of
        fp32, bf16, fp16 ("auto" resolved first), `quantize` None, nf4 or int8. The run pipeline
        calls it before `save_adapter`; a one-line ConfigError names a bad value."""
        self.training_scale = TrainingScale(precision, base_dtype, quantize)

    def record_chat_template(self, template: str) -> None:
        """Keep the chat template this adapter is trained with, for its manifest (serving
        renders chats with it). The run pipeline calls it before `save_adapter`."""
        self.chat_template = template

    def remember_start(self) -> None:
        """Keep a copy of the inserted modules' starting values (see `initial`)."""
        self.inserted_initial = {n: t.detach().clone() for n, t in self.inserted_tensors().items()}

    @property
    def trainable_names(self) -> list[str]:
        """Names of every tensor the adapter trains, group by group."""
        return [n for names in self.groups.values() for n in names]

    @property
    def initial(self) -> dict[str, torch.Tensor] | None:
        """The starting value of every tensor the adapter trains (None with keep_initial=False).

        Owned tensors started as the base model's weights, inserted modules at their seeded
        initialisation (what a loss landscape's theta0 is).
        """
        if self.inserted_initial is None:
            return None
        base = {n: self.state.base_tensor(n) for n in self.owned}
        return {**self.inserted_initial, **base}

    def parameter_counts(self) -> dict[str, int]:
        """Trainable parameters per group, plus 'trainable' and 'total'.

        'total' counts the model as it runs with this adapter: the base model's parameters and
        the inserted ones of this adapter (and, for a fusion, of the adapters it fuses).
        """
        tensors = self.tensors()
        counts = {g: sum(tensors[n].numel() for n in names) for g, names in self.groups.items()}
        counts["trainable"] = sum(t.numel() for t in tensors.values())
        units = [self, *(self.state.units[n] for n in self.fused)]
        inserted = sum(p.numel() for u in units for p in u.inserted_tensors().values())
        counts["total"] = self.state.base_parameter_count + inserted
        return counts

    def tensor_bytes(self) -> int:
        """Bytes of the tensors `save_adapter` stores, without its headers."""
        return sum(t.numel() * t.element_size() for t in self.saved_tensors().values())

    def summary(self) -> str:
        """A small table: trainable parameters per group and their share of the total."""
        counts = self.parameter_counts()
        total = counts["total"]
        rows = [(g, counts[g]) for g in self.groups] + [("trainable", counts["trainable"])]
        width = max(len(g) for g, _ in rows)
        what = "+".join(self.method_names)
        if self.is_fusion:
            what = f"fusion of {', '.join(self.fused)}"
        lines = [f"{self.name}: {what} on {self.backbone.model_class}"]
        lines += [f"  {g:<{width}}  {n:>12,}  {100 * n / total:8.4f}%" for g, n in rows]
        lines.append(f"  {'total':<{width}}  {total:>12,}")
        return "\n".join(lines)

    @contextmanager
    def disabled(self) -> Iterator[nn.Module]:
        """Base behaviour from the same model object (see `adaptlab.disabled`)."""
        with self.state.deactivated() as model:
            yield model

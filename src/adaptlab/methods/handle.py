"""What `adapt` returns: the record of one adaptation, able to switch it off and summarise it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from adaptlab.backbone import Backbone, BackboneOverrides
from adaptlab.errors import ConfigError
from adaptlab.methods.config import MethodConfig


class Switch:
    """Shared on/off flag that every inserted module consults in its hook."""

    def __init__(self) -> None:
        self.enabled = True


@dataclass
class AdaptHandle:
    """One adaptation of one model: its methods, trainable groups and inserted modules."""

    model: nn.Module
    backbone: Backbone
    configs: tuple[MethodConfig, ...]
    overrides: BackboneOverrides
    train_head: bool
    seed: int
    base_fingerprint: str
    groups: dict[str, list[str]]  # group -> canonical parameter names that train
    inserted: dict[str, dict[str, nn.Module]]  # method -> its inserted modules, by absolute name
    hooks: list[RemovableHandle]
    switch: Switch
    initial: dict[str, torch.Tensor] | None = field(default=None, repr=False)

    @property
    def method_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.configs)

    @property
    def trainable_names(self) -> list[str]:
        """Canonical names of every trainable parameter, in model order."""
        wanted = {n for names in self.groups.values() for n in names}
        return [n for n, _ in self.model.named_parameters() if n in wanted]

    def parameter_counts(self) -> dict[str, int]:
        """Trainable parameters per group, plus 'trainable' and 'total'."""
        params = dict(self.model.named_parameters())
        counts = {g: sum(params[n].numel() for n in names) for g, names in self.groups.items()}
        counts["trainable"] = sum(params[n].numel() for n in self.trainable_names)
        counts["total"] = sum(p.numel() for p in params.values())
        return counts

    def tensor_bytes(self) -> int:
        """Bytes of the trainable tensors: what `save_adapter` stores, without its headers."""
        params = dict(self.model.named_parameters())
        return sum(params[n].numel() * params[n].element_size() for n in self.trainable_names)

    def summary(self) -> str:
        """A small table: trainable parameters per group and their share of the total."""
        counts = self.parameter_counts()
        total = counts["total"]
        rows = [(g, counts[g]) for g in self.groups] + [("trainable", counts["trainable"])]
        width = max(len(g) for g, _ in rows)
        lines = [f"{'+'.join(self.method_names)} on {self.backbone.model_class}"]
        lines += [f"  {g:<{width}}  {n:>12,}  {100 * n / total:8.4f}%" for g, n in rows]
        lines.append(f"  {'total':<{width}}  {total:>12,}")
        return "\n".join(lines)

    @contextmanager
    def disabled(self) -> Iterator[nn.Module]:
        """Base behaviour from the same model object: hooks off, trained base weights swapped.

        Inserted modules are skipped; pretrained weights that trained (full, freeze, bitfit,
        lnfit, the head) are swapped for their values at adaptation time and swapped back
        bit-exactly on exit.
        """
        if any(
            getattr(m, "merged", False) for mods in self.inserted.values() for m in mods.values()
        ):
            raise ConfigError("cannot disable adaptation while LoRA is merged: unmerge it first")
        base_trained = self._trained_base_parameters()
        if base_trained and self.initial is None:
            raise ConfigError(
                "this adaptation trains pretrained weights but kept no initial copy "
                "(adapt(..., keep_initial=False)); cannot switch it off"
            )
        swapped: list[tuple[nn.Parameter, torch.Tensor]] = []
        self.switch.enabled = False
        try:
            for name, param in base_trained:
                assert self.initial is not None
                swapped.append((param, param.data))
                param.data = self.initial[name]
            yield self.model
        finally:
            for param, data in swapped:
                param.data = data
            self.switch.enabled = True

    def _trained_base_parameters(self) -> list[tuple[str, nn.Parameter]]:
        inserted = {
            f"{prefix}.{n}"
            for mods in self.inserted.values()
            for prefix, module in mods.items()
            for n, _ in module.named_parameters()
        }
        params = dict(self.model.named_parameters())
        return [(n, params[n]) for n in self.trainable_names if n not in inserted]

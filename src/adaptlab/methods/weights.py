"""The base model's pretrained weights, and the copies adapters own of them.

An adapter that trains pretrained weights (its head, norms, biases, everything for `full`)
gets its own tensors for them (`own`); running it puts them in the model's place (`place`),
and the displaced base tensors are kept, so switching every adapter off gives the base model
back, bit for bit. A tied weight sits in several modules (slots) under one canonical name and
is replaced in all of them at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import nn

from adaptlab.backbone.parts import get_module
from adaptlab.errors import ConfigError
from adaptlab.models.quantize import logical_numel

Slot = tuple[nn.Module, str]


class BaseWeights:
    """Every pretrained weight of `model` by canonical name, and the base values displaced."""

    def __init__(self, model: nn.Module) -> None:
        self._slots = _parameter_slots(model)
        self._originals: dict[str, nn.Parameter | None] = {}
        """Base weights of the slots some adapter owns; None where keep_initial=False took it."""
        self.parameter_count = sum(logical_numel(_param(slots)) for slots in self._slots.values())
        """Weights of the base model, a quantised layer's counted as the ones it stands for."""

    @property
    def names(self) -> list[str]:
        """Canonical names of the base model's parameters, in model order."""
        return list(self._slots)

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

    def base_tensor(self, name: str) -> torch.Tensor:
        """The pretrained value of base parameter `name` (as loaded, before any training)."""
        original = self._originals.get(name, _param(self._slots[name]))
        if original is None:
            raise ConfigError(f"{name!r} has no base value left (keep_initial=False)")
        return original

    def lost(self, wanted: Mapping[str, nn.Parameter]) -> str | None:
        """The first owned weight that `wanted` leaves to a base value no longer kept."""
        return next(
            (n for n, base in self._originals.items() if base is None and n not in wanted), None
        )

    def place(self, wanted: Mapping[str, nn.Parameter]) -> None:
        """Put `wanted` in place, and the base value (where kept) in every other owned slot."""
        for name, original in self._originals.items():
            target = wanted.get(name, original)
            if target is not None:
                self._put(name, target)

    def release(self, names: Iterable[str], still_owned: set[str]) -> None:
        """An adapter owning `names` is gone: the base values of those no other adapter owns
        (`still_owned`) go back in place."""
        for name in names:
            if name not in still_owned:
                original = self._originals.pop(name)
                if original is not None:
                    self._put(name, original)

    def freeze_bases(self) -> None:
        """The displaced base values do not train."""
        for original in self._originals.values():
            if original is not None:
                original.requires_grad_(False)

    def _put(self, name: str, tensor: nn.Parameter) -> None:
        slots = self._slots[name]
        current = _param(slots)
        if current is tensor:
            return
        if tensor.device != current.device or tensor.dtype != current.dtype:
            tensor.data = tensor.data.to(device=current.device, dtype=current.dtype)
        for module, attribute in slots:
            setattr(module, attribute, tensor)


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

"""Swap adapters inside the running Stack at test time (MAD-X's zero-shot transfer).

A task adapter trained on `Stack(lang-en, task)` is tested on another language by running
`Stack(lang-sl, task)`: the target language's adapter, trained by masked-LM on its text,
takes the source language's place (Pfeiffer et al. 2020, MAD-X §2.3; the AdapterHub slides).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from torch import nn

from adaptlab.engine.adapters import load_frozen
from adaptlab.errors import ConfigError
from adaptlab.methods.adapt import active, delete_adapter, list_adapters, set_active
from adaptlab.methods.blocks import Stack
from adaptlab.records.transfer import Swap


def parse_swaps(values: Sequence[str]) -> tuple[Swap, ...]:
    """`NAME=FOLDER` pairs as written on the command line."""
    swaps = []
    for value in values:
        name, sep, folder = value.partition("=")
        if not sep or not name.strip() or not folder.strip():
            raise ConfigError(
                f"--stack-swap {value!r} is not NAME=FOLDER, e.g. lang-en=runs/lang-sl"
            )
        swaps.append((name.strip(), folder.strip()))
    return tuple(swaps)


def swap_stacked(model: nn.Module, swaps: Sequence[Swap]) -> Stack:
    """Load each swap's adapter (without its head) and run it in place of the named one; the
    Stack that ran before is returned. Every name is checked before anything loads."""
    running = active(model)
    if not isinstance(running, Stack):
        raise ConfigError(
            f"--stack-swap needs an adapter trained stacked on others; this one runs {running}"
        )
    stacked = [c for c in running.children if isinstance(c, str)]
    olds = [old for old, _ in swaps]
    for old in olds:
        if old not in stacked[:-1]:
            raise ConfigError(
                f"--stack-swap {old}: no adapter {old!r} under the task adapter in {running}; "
                f"swap one of {', '.join(stacked[:-1]) or 'none'}"
            )
    if len(set(olds)) != len(olds):
        raise ConfigError(f"--stack-swap names {olds} more than once")
    present = list_adapters(model)
    names = load_frozen(model, tuple(folder for _, folder in swaps), taken=present)
    replacement = dict(zip(olds, names, strict=True))
    set_active(
        model,
        Stack(*(replacement.get(c, c) if isinstance(c, str) else c for c in running.children)),
    )
    return running


@contextmanager
def stack_swapped(model: nn.Module, swaps: Sequence[Swap]) -> Iterator[nn.Module]:
    """Inside the block the swapped Stack runs; on exit the original one runs again and the
    adapters loaded for the swap are gone."""
    if not swaps:
        yield model
        return
    before = set(list_adapters(model))
    running = swap_stacked(model, swaps)
    try:
        yield model
    finally:
        set_active(model, running)
        for name in [n for n in list_adapters(model) if n not in before]:
            delete_adapter(model, name)

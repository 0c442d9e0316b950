"""`adaptlab combine`: one adapter from several trained ones, without training."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from adaptlab.cli.options import BaseModel, seed
from adaptlab.errors import ConfigError


def combine(
    adapters: Annotated[
        str,
        typer.Option(help="The adapter or run folders to combine (two or more), comma-separated."),
    ],
    out: Annotated[Path, typer.Option(help="The combined adapter folder to write (new).")],
    weights: Annotated[
        str | None,
        typer.Option(
            help="One weight per adapter, comma-separated; negative subtracts a behaviour "
            "(default: equal weights summing to 1, the average)."
        ),
    ] = None,
    how: Annotated[
        str,
        typer.Option(
            help="linear (the weighted sum of the updates), peft_linear (PEFT's linear: LoRA's "
            "A and B merged apart), cat, svd, ties, ties_svd, dare_linear, dare_ties, "
            "dare_linear_svd, dare_ties_svd, magnitude_prune or magnitude_prune_svd."
        ),
    ] = "linear",
    density: Annotated[
        float | None,
        typer.Option(
            help="Fraction of each adapter's change kept by ties, dare_* and magnitude_prune."
        ),
    ] = None,
    rank: Annotated[
        int | None,
        typer.Option(help="LoRA rank of the *_svd results (default: the largest source rank)."),
    ] = None,
    majority_sign: Annotated[
        str, typer.Option(help="TIES's sign election: total or frequency.")
    ] = "total",
    seed_: Annotated[int, typer.Option("--seed", help="Seed of DARE's masks.", callback=seed)] = 0,
    names: Annotated[
        str | None,
        typer.Option(
            help="The adapters' names, comma-separated (default: their folders' names); "
            "sources with different labels keep their heads under these names."
        ),
    ] = None,
    model: BaseModel = None,
) -> None:
    """Combine trained adapters of one base model into one adapter folder, without training:
    task arithmetic (linear: the weighted sum of the adapters' updates, LoRA's pairs stacked),
    TIES, DARE, magnitude pruning, and for LoRA also SVD re-factorisation and PEFT's
    factor-wise linear (peft_linear); the numbers of PEFT's add_weighted_adapter. The folder
    loads like any adapter; sources trained on different labels keep their heads (pick one
    with --head).

    Example:

        adaptlab combine --adapters runs/rt,runs/tweets --how ties --density 0.5 --out runs/both

        adaptlab combine --adapters runs/chat,runs/rude --weights 1,-0.5 --out runs/polite
    """
    from adaptlab.methods.combine import combine_adapters
    from adaptlab.tasks.adapter_manifest import read_adapter_manifests

    sources = _items(adapters, "--adapters")
    read_adapter_manifests(sources)
    combined = combine_adapters(
        sources,
        out,
        weights=None if weights is None else [_number(w) for w in _items(weights, "--weights")],
        how=how,
        density=density,
        rank=rank,
        majority_sign=majority_sign,
        seed=seed_,
        names=None if names is None else _items(names, "--names"),
        model=model,
    )
    print(f"wrote {combined} ({how} of {len(sources)} adapters)")


def _items(text: str, option: str) -> list[str]:
    """The comma-separated items of an option, none empty."""
    if not text.strip():
        raise ConfigError(f"{option} is empty; give comma-separated values, one per adapter")
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise ConfigError(f"{option} has an empty item: give comma-separated values")
    return items


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"--weights: {text!r} is not a number") from None

"""Per-layer similarity of an adapted model to its base: the same object, adaptation off and on.

paper-effectiveness §2.2: the same sampled tokens go through the base and the adapted model;
each layer's two representations are compared with RSA (or linear CKA).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import nn

from adaptlab.analysis.cka import linear_cka
from adaptlab.analysis.features import layer_features, layer_names
from adaptlab.analysis.rsa import rsa
from adaptlab.analysis.tokens import TokenSample
from adaptlab.data.encoding import TextEncoder
from adaptlab.engine.trained_run import Collator
from adaptlab.errors import ConfigError, DataError
from adaptlab.methods.adapt import disabled

Measure = Callable[[torch.Tensor, torch.Tensor], float]

MEASURES: dict[str, Measure] = {
    "rsa": rsa,
    "cka": linear_cka,
    "cka-debiased": partial(linear_cka, debiased=True),
}


MIN_TOKENS = {"rsa": 3, "cka": 2, "cka-debiased": 4}
"""Tokens each measure needs: RSA two similarity pairs, CKA two rows, debiased CKA four (its
estimator divides by N - 3)."""


def check_tokens(name: str, tokens: int) -> None:
    """`tokens` is enough for measure `name`; checked before any model loads."""
    least = MIN_TOKENS[name]
    if tokens < least:
        raise ConfigError(f"--tokens must be at least {least} for {name}, got {tokens}")


def get_measure(name: str) -> Measure:
    """The similarity measure called `name`."""
    if name not in MEASURES:
        raise ConfigError(f"unknown similarity measure {name!r}; choose {', '.join(MEASURES)}")
    return MEASURES[name]


@dataclass(frozen=True)
class LayerScores:
    """One score per layer (0 = embeddings, i = block i) of the adapted model against its base."""

    measure: str
    layers: tuple[str, ...]
    scores: tuple[float, ...]
    tokens: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "measure": self.measure,
            "tokens": self.tokens,
            "seed": self.seed,
            "layers": [
                {"layer": i, "module": name, "score": score}
                for i, (name, score) in enumerate(zip(self.layers, self.scores, strict=True))
            ],
        }


def base_and_adapted(
    model: nn.Module,
    encoder: TextEncoder | Collator,
    features: Sequence[Any],
    sample: TokenSample,
    *,
    batch_size: int = 32,
    progress: bool = False,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per-layer features of the sampled tokens with adaptation switched off, then on
    (`encoder` batches `features`: see `layer_features`)."""
    with disabled(model):
        base = layer_features(
            model, encoder, features, sample, batch_size=batch_size, progress=progress, desc="base"
        )
    adapted = layer_features(
        model, encoder, features, sample, batch_size=batch_size, progress=progress, desc="adapted"
    )
    return base, adapted


def compare_to_base(
    model: nn.Module,
    encoder: TextEncoder | Collator,
    features: Sequence[Any],
    sample: TokenSample,
    measures: Sequence[str] = ("rsa",),
    *,
    seed: int = 0,
    batch_size: int = 32,
    progress: bool = False,
) -> dict[str, LayerScores]:
    """For each measure, the per-layer score of the adapted model against its base, on the
    sampled tokens of `features` (an encoder's feature dicts or a decoder's examples), which
    `encoder` batches (see `layer_features`)."""
    chosen = {name: get_measure(name) for name in measures}
    base, adapted = base_and_adapted(
        model, encoder, features, sample, batch_size=batch_size, progress=progress
    )
    names = tuple(layer_names(model))
    for name, *pair in zip(names, base, adapted, strict=True):
        for side, values in zip(("base", "adapted"), pair, strict=True):
            if not torch.isfinite(values).all():
                raise DataError(
                    f"layer {name}: the {side} model's representations hold NaN or infinite "
                    "values, so no similarity can be measured; are the run's weights finite "
                    "(did its training diverge)?"
                )
    return {
        name: LayerScores(
            measure=name,
            layers=names,
            scores=tuple(measure(b, a) for b, a in zip(base, adapted, strict=True)),
            tokens=len(sample),
            seed=seed,
        )
        for name, measure in chosen.items()
    }

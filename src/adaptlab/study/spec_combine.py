"""A study's `combine:` entry: how to combine, without training, the adapters one method
trained on every data set of the study (`adaptlab.combine_adapters`'s options).

    - {combine: {how: ties, density: 0.5}, adapters: [single], label: ties}

`how` is one of `adaptlab.methods.combination.HOWS`: `linear` is the weighted sum of the
adapters' updates (LoRA's pairs stacked, of any ranks), `peft_linear` PEFT's linear (LoRA's A
and B merged apart). `weights` give one weight per data set, in the order of `data:` (default:
equal, summing to 1: the average). The options are checked as `adaptlab.combine_adapters` checks
them when the spec is read.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from adaptlab.errors import ConfigError
from adaptlab.methods.combination import Combination
from adaptlab.study.spec_fields import Seed, StrictModel, options_label

COMBINE = "combine"


class CombineOptions(StrictModel):
    """`how` (linear, peft_linear, ties, dare_ties, ...), `weights` (one per data set),
    `density`, `rank`, `majority_sign` and `seed`, as `adaptlab.combine_adapters` takes them."""

    how: str
    weights: Annotated[list[float], Field(min_length=1)] | None = None
    density: float | None = None
    rank: int | None = None
    majority_sign: str = "total"
    seed: Seed = 0

    @model_validator(mode="after")
    def _combinable(self) -> CombineOptions:
        try:
            self.combination(len(self.weights or [None]))
        except ConfigError as error:  # the error names the key already: combine
            raise ValueError(str(error).removeprefix(f"{COMBINE}: ")) from None
        return self

    def weights_for(self, sources: int) -> tuple[float, ...]:
        """The weights of `sources` sources: those given, else equal ones summing to 1."""
        return tuple(self.weights) if self.weights is not None else (1 / sources,) * sources

    def combination(self, sources: int) -> Combination:
        """The checked combination of `sources` sources."""
        return Combination(
            how=self.how,
            weights=self.weights_for(sources),
            density=self.density,
            rank=self.rank,
            majority_sign=self.majority_sign,
            seed=self.seed,
        )

    @property
    def label(self) -> str:
        """`combine(how=ties, density=0.5)`: the options written in the spec."""
        return COMBINE + options_label(self.model_dump(exclude_unset=True))

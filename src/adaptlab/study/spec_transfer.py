"""What a grid builds on and is scored on beyond its own data: source adapters trained once
per model before the grid (to fuse or stack on), and data sets scored zero-shot."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, PositiveInt, model_validator

from adaptlab.study.spec_data import DataEntry
from adaptlab.study.spec_fields import Seed, StrictModel
from adaptlab.study.spec_methods import MethodSpecField


class SourceEntry(StrictModel):
    """An adapter trained once per model, before the grid, for methods to fuse or stack on."""

    label: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
    data: DataEntry
    method: MethodSpecField
    train_size: PositiveInt | None = None
    epochs: PositiveInt | None = None
    batch_size: PositiveInt | None = None
    learning_rate: Annotated[float, Field(gt=0, lt=1)] | None = None
    seed: Seed | None = None

    def run_method(self) -> list[dict[str, dict[str, Any]]]:
        """The method as `RunSpec.build` takes it."""
        return [{name: dict(options)} for name, options in self.method]


class ZeroShotEntry(StrictModel):
    """A data set every grid run is also scored on, zero-shot (its test split, labels matched
    by name); `stack_swap` runs, for it, another adapter in place of a stacked one (MAD-X:
    {lang-en: lang-sl}, each a source label or an adapter folder)."""

    data: DataEntry
    stack_swap: dict[Annotated[str, Field(min_length=1)], Annotated[str, Field(min_length=1)]] = {}

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: object) -> object:
        """`slovenian-opinions` is short for `{data: slovenian-opinions}`."""
        return {"data": value} if isinstance(value, str) else value

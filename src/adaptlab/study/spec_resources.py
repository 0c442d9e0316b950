"""What each run of a study asks of a Ray cluster (the spec's `resources:` key)."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    ValidationInfo,
    field_validator,
)

from adaptlab.study.spec_fields import StrictModel

RAY_RESOLUTION = 10_000
"""Ray counts resources in units of 1/10,000 (0.0001 of a CPU or GPU)."""


class Resources(StrictModel):
    """What each run asks of a Ray cluster (one task per run), and how many times Ray starts a
    run again elsewhere when the node or worker process it ran on died (`max_retries`). A run
    with `nproc` > 1 trains on that many Ray Train workers, each asking `cpus` and `gpus`."""

    cpus: PositiveFloat = 1.0
    gpus: NonNegativeFloat = 0.0
    max_retries: Annotated[int, Field(ge=0)] = 3
    nproc: PositiveInt = 1

    @field_validator("cpus", "gpus")
    @classmethod
    def _ray_quantity(cls, value: float, info: ValidationInfo) -> float:
        scaled = value * RAY_RESOLUTION
        if abs(scaled - round(scaled)) > 1e-6:
            raise ValueError(
                f"{info.field_name} has more decimals than Ray counts (0.0001), got {value!r}"
            )
        if info.field_name == "gpus" and value > 1 and not float(value).is_integer():
            raise ValueError(
                "gpus must be a share of one GPU (0.25: four runs on one GPU) or a whole "
                f"number of GPUs, got {value!r}"
            )
        return value

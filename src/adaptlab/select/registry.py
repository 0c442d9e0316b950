"""Estimators by name, and parsing the `--estimators` list."""

from __future__ import annotations

from collections.abc import Callable

from adaptlab.errors import ConfigError
from adaptlab.select.base import Estimator
from adaptlab.select.gbc import GBC
from adaptlab.select.hscore import HScore
from adaptlab.select.intra_variance import IntraClassVariance
from adaptlab.select.knn import KNN
from adaptlab.select.logme import LogME
from adaptlab.select.nleep import NLEEP
from adaptlab.select.transrate import TransRate

ESTIMATORS: dict[str, Callable[[], Estimator]] = {
    LogME.name: LogME,
    HScore.name: HScore,
    NLEEP.name: NLEEP,
    KNN.name: KNN,
    GBC.name: GBC,
    TransRate.name: TransRate,
    IntraClassVariance.name: IntraClassVariance,
}


def make_estimators(names: str) -> list[Estimator]:
    """`all` or a comma-separated list of estimator names, as estimator objects."""
    wanted = (
        list(ESTIMATORS)
        if names.strip() == "all"
        else [name.strip() for name in names.split(",") if name.strip()]
    )
    unknown = [name for name in wanted if name not in ESTIMATORS]
    if unknown or not wanted:
        raise ConfigError(
            f"unknown estimator {', '.join(unknown) or '(none given)'}; "
            f"choose from all, {', '.join(ESTIMATORS)}"
        )
    return [ESTIMATORS[name]() for name in dict.fromkeys(wanted)]

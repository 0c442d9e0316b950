"""The estimators by name, in the order `all` runs them and listings show them, and parsing
the `--estimators` list."""

from __future__ import annotations

from adaptlab.errors import ConfigError
from adaptlab.registry import Registry
from adaptlab.select.base import Estimator
from adaptlab.select.gbc import GBC
from adaptlab.select.hscore import HScore
from adaptlab.select.intra_variance import IntraClassVariance
from adaptlab.select.knn import KNN
from adaptlab.select.logme import LogME
from adaptlab.select.nleep import NLEEP
from adaptlab.select.transrate import TransRate

ESTIMATORS: Registry[type[Estimator]] = Registry("estimator")
"""Each estimator class says itself what it takes: `regression` targets or not, and the
examples of every class it needs (`needed_per_class`)."""

ESTIMATORS.register(LogME)
ESTIMATORS.register(HScore)
ESTIMATORS.register(NLEEP)
ESTIMATORS.register(KNN)
ESTIMATORS.register(GBC)
ESTIMATORS.register(TransRate)
ESTIMATORS.register(IntraClassVariance)


def make_estimators(names: str) -> list[Estimator]:
    """`all` or a comma-separated list of estimator names, as estimator objects (defaults)."""
    known = ESTIMATORS.names()
    wanted = (
        known
        if names.strip() == "all"
        else [name.strip() for name in names.split(",") if name.strip()]
    )
    unknown = [name for name in wanted if name not in ESTIMATORS]
    if unknown or not wanted:
        raise ConfigError(
            f"unknown estimator {', '.join(unknown) or '(none given)'}; "
            f"choose from all, {', '.join(known)}"
        )
    return [ESTIMATORS.get(name)() for name in dict.fromkeys(wanted)]

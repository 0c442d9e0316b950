"""What a run's record keeps of what adaptation did to its model, as the report reads it: its
forgetting on source probes with what it learnt of its own data (a study's `forgetting:`), and
the spectrum of its weight updates (`analysis: [spectrum]`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProbeForgetting:
    """One probe's forgetting (positive: lost) and its paired standard error, in the probe's
    measure (nats per token for text and data, a share of facts or documents otherwise)."""

    probe: str
    measure: str
    forgetting: float
    standard_error: float


@dataclass(frozen=True)
class RunForgetting:
    """What a run learnt (the drop in mean NLL per token on its own test split, nats) and what
    it forgot on each probe."""

    learnt: float
    learnt_error: float
    probes: tuple[ProbeForgetting, ...]

    @classmethod
    def of(cls, found: Mapping[str, Any]) -> RunForgetting:
        target = found["target"]
        probes = tuple(
            ProbeForgetting(
                p["probe"], p["measure"], float(p["forgetting"]), float(p["standard_error"])
            )
            for p in found["probes"]
        )
        return cls(-float(target["forgetting"]), float(target["standard_error"]), probes)


@dataclass(frozen=True)
class RunSpectrum:
    """Per block, the mean effective rank (90% of the squared spectrum) of the matrices the run
    changed; their intruder dimensions in all; the methods that change no matrix."""

    ranks: tuple[tuple[int, float], ...]
    intruders: int
    without_matrix: tuple[str, ...]

    @property
    def mean_rank(self) -> float | None:
        return sum(r for _, r in self.ranks) / len(self.ranks) if self.ranks else None

    @classmethod
    def of(cls, found: Mapping[str, Any]) -> RunSpectrum:
        ranks, intruders = [], 0
        for layer in found["layers"]:
            kinds = [v for k, v in layer.items() if k != "layer"]
            count = sum(v["matrices"] for v in kinds)
            total = sum(v["mean_effective_rank"] * v["matrices"] for v in kinds)
            ranks.append((int(layer["layer"]), total / count))
            intruders += sum(int(v["intruders"]) for v in kinds)
        return cls(tuple(ranks), intruders, tuple(found["without_matrix"]))

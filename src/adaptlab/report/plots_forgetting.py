"""The figures of the learning-and-forgetting section: learning against forgetting with the
frontier (a panel per probe), and the effective rank of weight updates per block."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib
from matplotlib.figure import Figure

from adaptlab.report.plots import STYLE, Color, encode, finished, legend, plain


@dataclass(frozen=True)
class Point:
    """One method (at one learning rate): mean ± std over seeds of what it learnt (x) and
    forgot (y)."""

    label: str
    method: str
    x: float
    x_std: float
    y: float
    y_std: float


def frontier_of(points: Sequence[Point]) -> list[Point]:
    """The points no other point beats on both learning more and forgetting less, by x."""
    kept = [
        p
        for p in points
        if not any(q.x >= p.x and q.y <= p.y and (q.x, q.y) != (p.x, p.y) for q in points)
    ]
    return sorted(kept, key=lambda p: p.x)


def frontier(points: Mapping[str, Sequence[Point]], colors: Mapping[str, Color], title: str) -> str:
    """A panel per probe: forgetting against learning, a point per method with error bars,
    the frontier dashed."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(4.2 * len(points) + 1.6, 3.6), layout="constrained")
        axes = fig.subplots(1, len(points), squeeze=False)[0]
        for ax, (probe, found) in zip(axes, points.items(), strict=True):
            for p in found:
                ax.errorbar(
                    [p.x], [p.y], xerr=[p.x_std], yerr=[p.y_std], fmt="o", ms=6, capsize=3,
                    color=colors[p.method], label=plain(p.label),
                )  # fmt: skip
            line = frontier_of(found)
            ax.plot([p.x for p in line], [p.y for p in line], "--", color="grey", lw=1)
            ax.axhline(0, color="black", lw=0.6)
            ax.set_xlabel("learnt: NLL drop on its own test split (nats/token)")
            ax.set_ylabel(f"forgetting: {plain(probe)}")
        fig.suptitle(plain(title))
        legend(axes[-1])
        return encode(fig)


def ranks(
    curves: Mapping[str, Sequence[tuple[int, float]]], colors: Mapping[str, Color], title: str
) -> str:
    """The mean effective rank of the updated matrices per block, a line per method."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8, 3.4), layout="constrained")
        ax = fig.add_subplot()
        for label, curve in curves.items():
            ax.plot([b for b, _ in curve], [r for _, r in curve], "o-", ms=3,
                    color=colors[label], label=plain(label))  # fmt: skip
        ax.set_yscale("log")
        return finished(fig, ax, "block", "effective rank of ΔW (90%)", title)

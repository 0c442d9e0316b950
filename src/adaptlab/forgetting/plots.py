"""The forgetting of each probe as a bar with its standard error (positive: a loss)."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from adaptlab.forgetting.paired import Forgetting


def forgetting_figure(results: Sequence[Forgetting], title: str) -> Figure:
    """One horizontal bar per probe, in its own unit (nats per token, share of facts, accuracy)."""
    fig = Figure(figsize=(7, 0.6 * len(results) + 1.4), layout="constrained")
    ax = fig.add_subplot()
    labels = [f"{r.probe} ({r.measure})" for r in results]
    values = [r.forgetting for r in results]
    errors = [r.standard_error for r in results]
    colours = ["tab:red" if v > 0 else "tab:blue" for v in values]
    ax.barh(labels, values, xerr=errors, color=colours, capsize=3)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.invert_yaxis()
    ax.set_xlabel("forgetting (base - adapted; positive: lost), ± 1 standard error")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return fig

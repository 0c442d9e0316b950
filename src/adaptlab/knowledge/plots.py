"""PNG plots of knowledge-neuron results (matplotlib Figure, no pyplot state)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from adaptlab.fileio import save_png
from adaptlab.knowledge.compare import OUTCOMES


def layer_histogram_plot(counts: list[int], title: str, path: Path) -> None:
    """Bars of knowledge neurons per layer (the slides' "KNs @ layer")."""
    figure = Figure(figsize=(7, 3.2))
    axes = figure.add_subplot()
    axes.bar(range(len(counts)), counts, color="#4c72b0")
    axes.set_xlabel("layer")
    axes.set_ylabel("knowledge neurons")
    axes.set_title(_plain(title))
    figure.tight_layout()
    save_png(figure, path)


def _plain(text: str) -> str:
    """`text` shown as written: a $ would start matplotlib's math mode."""
    return text.replace("$", r"\$")


def effect_plot(knowledge: float, random: float, title: str, path: Path) -> None:
    """Mean relative change of the correct answer's probability: knowledge vs random neurons."""
    figure = Figure(figsize=(4, 3.2))
    axes = figure.add_subplot()
    axes.bar(["knowledge", "random"], [100 * knowledge, 100 * random], color=["#c44e52", "#8c8c8c"])
    axes.axhline(0, color="black", linewidth=0.8)
    axes.set_ylabel("change of P(correct answer), %")
    axes.set_title(title)
    figure.tight_layout()
    save_png(figure, path)


def compare_plot(summary: dict[str, Any], title: str, path: Path) -> None:
    """Knowledge neurons per layer, base against adapted, over the facts the base answers;
    beside it the facts kept, lost and gained."""
    figure = Figure(figsize=(10, 3.4))
    layers_axes, facts_axes = figure.subplots(1, 2, width_ratios=(3, 1))
    layers = summary["base_known"]["layers"]
    positions = range(len(layers["base"]))
    width = 0.4
    layers_axes.bar([p - width / 2 for p in positions], layers["base"], width, label="base")
    layers_axes.bar([p + width / 2 for p in positions], layers["adapted"], width, label="adapted")
    layers_axes.set_xlabel("layer")
    layers_axes.set_ylabel("knowledge neurons")
    layers_axes.set_title("facts the base answers: neurons per layer")
    layers_axes.legend()
    counts = summary["answered"]
    shown = [name for name in OUTCOMES if name != "neither"]
    facts_axes.bar(shown, [counts[name] for name in shown], color=["#55a868", "#c44e52", "#4c72b0"])
    facts_axes.set_ylabel("facts")
    for axis in (layers_axes.xaxis, layers_axes.yaxis, facts_axes.yaxis):
        axis.set_major_locator(MaxNLocator(integer=True))
    facts_axes.set_title("answers")
    figure.suptitle(_plain(title))
    figure.tight_layout()
    save_png(figure, path)

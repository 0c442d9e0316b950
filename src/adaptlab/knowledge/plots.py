"""PNG plots of knowledge-neuron results (matplotlib Figure, no pyplot state)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from adaptlab.analysis.plots import save_png


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

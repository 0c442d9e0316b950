"""PNG figures of analyses: per-layer similarity curves (paper-effectiveness fig. 2), loss
landscapes (fig. 6), AdapterFusion weights and the spectrum of weight updates. Built on
`matplotlib.figure.Figure` (no pyplot, no global backend)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator


def layer_figure(curves: Mapping[str, Sequence[float]], measure: str, title: str) -> Figure:
    """One line per label: score at layer 0 (embeddings) .. L (last block)."""
    fig = Figure(figsize=(6, 3.6), layout="constrained")
    ax = fig.add_subplot()
    for label, scores in curves.items():
        ax.plot(range(len(scores)), scores, marker="o", label=label)
    ax.set_xlabel("layer (0 = embeddings)")
    ax.set_ylabel(f"{measure.upper()} against the base model")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return fig


def landscape_figure(
    curves: Mapping[str, tuple[Sequence[float], Sequence[float]]], title: str
) -> Figure:
    """Loss against alpha, one line per label; alpha 0 is the start, 1 the trained model."""
    fig = Figure(figsize=(6, 3.6), layout="constrained")
    ax = fig.add_subplot()
    for label, (alphas, losses) in curves.items():
        ax.plot(alphas, losses, marker=".", label=label)
    for alpha in (0.0, 1.0):
        ax.axvline(alpha, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("alpha (0 = start, 1 = trained)")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return fig


def fusion_figure(layers: Mapping[str, Sequence[float]], title: str) -> Figure:
    """A fusion's mean weight per adapter (rows) and fusion layer (columns), as a heat map."""
    adapters = list(layers)
    fig = Figure(figsize=(8, 0.8 + 0.42 * len(adapters)), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow([list(layers[a]) for a in adapters], aspect="auto", vmin=0.0)
    ax.set_yticks(range(len(adapters)), adapters)
    ax.set_xticks(range(len(layers[adapters[0]])))
    ax.set_xlabel("fusion layer (bottom to top)")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, label="mean weight")
    return fig


def spectrum_figure(layers: Sequence[Mapping[str, Any]], title: str) -> Figure:
    """Per block: the mean effective rank (0.9 of the squared spectrum) of the changed matrices
    and their intruder dimensions, one line per kind (attention, ffn, other)."""
    fig = Figure(figsize=(7, 5), layout="constrained")
    rank_ax, intruder_ax = fig.subplots(2, 1, sharex=True)
    kinds = sorted({kind for layer in layers for kind in layer if kind != "layer"})
    for kind in kinds:
        present = [layer for layer in layers if kind in layer]
        blocks = [layer["layer"] for layer in present]
        rank_ax.plot(blocks, [x[kind]["mean_effective_rank"] for x in present], "o-", label=kind)
        intruder_ax.plot(blocks, [x[kind]["intruders"] for x in present], "o-", label=kind)
    rank_ax.set_ylabel("effective rank of ΔW (90%)")
    intruder_ax.set_ylabel("intruder dimensions")
    intruder_ax.set_xlabel("block")
    intruder_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    rank_ax.set_title(title)
    for ax in (rank_ax, intruder_ax):
        ax.grid(alpha=0.3)
        ax.legend()
    return fig

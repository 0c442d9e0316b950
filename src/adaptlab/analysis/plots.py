"""PNG figures of analyses: per-layer similarity curves (paper-effectiveness fig. 2), loss
landscapes (fig. 6) and AdapterFusion weights. Built on `matplotlib.figure.Figure` (no pyplot,
no global backend)."""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib.figure import Figure

from adaptlab.fileio import atomic_write


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


def save_png(fig: Figure, path: str | os.PathLike[str]) -> None:
    """Write `fig` as a PNG, atomically."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    atomic_write(Path(path), buffer.getvalue())

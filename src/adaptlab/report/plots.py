"""The report's figures (paper-effectiveness figs. 3, 4, 5 and 9 in spirit), each returned as a
`data:image/svg+xml;base64,...` URI so the HTML needs no other file.

Built on `matplotlib.figure.Figure` directly (no pyplot), so no global backend is switched and
nothing is drawn on screen; text is drawn as paths, so no font is needed to view the SVG.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.typing import RcKeyType

import adaptlab.report.formatting as fmt
from adaptlab.analysis.plots import fusion_figure
from adaptlab.continual.metrics import LOWER_IS_BETTER
from adaptlab.report.aggregate import Cell, EpochCurve, MeanCurve, scored
from adaptlab.report.spread import DIVERGED, finite

STYLE: dict[RcKeyType, Any] = {
    "svg.fonttype": "path",
    "svg.hashsalt": "adaptlab-report",  # stable ids: the same study gives the same file
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
Color = tuple[float, float, float, float]


def palette(methods: Sequence[str]) -> dict[str, Color]:
    """One colour per method, the same in every figure."""
    cmap = matplotlib.colormaps["tab10" if len(methods) <= 10 else "tab20"]
    return {m: tuple(cmap(i % cmap.N)) for i, m in enumerate(methods)}  # type: ignore[misc]


def plain(text: str) -> str:
    """Text for matplotlib with `$` escaped, so a method label is never parsed as mathtext."""
    return text.replace("$", r"\$")


def efficiency(cells: Sequence[Cell], colors: Mapping[str, Color], title: str) -> str:
    """Test score (mean ± std over seeds) against trainable parameters, log x; one point per
    method at its chosen learning rate (none for a method whose every run diverged)."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8, 3.6), layout="constrained")
        ax = fig.add_subplot()
        for c in scored(cells):
            ax.errorbar(
                [c.trainable],
                [c.mean],
                yerr=[c.std],
                fmt="o",
                ms=7,
                capsize=4,
                color=colors[c.method],
                label=plain(c.method),
            )
        ax.set_xscale("log")
        return finished(
            fig, ax, "trainable parameters (log scale)", _test_label(cells[0].metric), title
        )


def training_size(cells: Sequence[Cell], colors: Mapping[str, Color], title: str) -> str:
    """Test score against the number of training examples, one line per method (fig. 3); a
    size where every run of a method diverged has no point."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8, 3.6), layout="constrained")
        ax = fig.add_subplot()
        methods = list(dict.fromkeys(c.method for c in cells))
        for method in methods:
            line = sorted(
                (c for c in scored(cells) if c.method == method),
                key=lambda c: c.setting.train_size,
            )
            if not line:
                continue
            ax.errorbar(
                [c.setting.train_size for c in line],
                [c.mean for c in line],
                yerr=[c.std for c in line],
                fmt="-o",
                capsize=3,
                color=colors[method],
                label=plain(method),
            )
        sizes = sorted({c.setting.train_size for c in cells})
        if sizes[-1] >= 10 * sizes[0]:
            ax.set_xscale("log")
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.minorticks_off()
        return finished(fig, ax, "training examples", _test_label(cells[0].metric), title)


def learning_rates(cells: Sequence[Cell], colors: Mapping[str, Color], title: str) -> str:
    """Box plots of test scores over seeds, per learning rate and method, seeds as dots (fig. 4);
    diverged runs have none."""
    rates = sorted({c.learning_rate for c in cells}, key=lambda r: -1.0 if r is None else r)
    methods = list(dict.fromkeys(c.method for c in cells))
    width = 0.8 / len(methods)
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8, 3.6), layout="constrained")
        ax = fig.add_subplot()
        for c in scored(cells):
            x = rates.index(c.learning_rate) + (methods.index(c.method) + 0.5) * width - 0.4
            box = ax.boxplot(
                [c.scores],
                positions=[x],
                widths=width * 0.8,
                patch_artist=True,
                medianprops={"color": "black"},
                showfliers=False,
            )
            for patch in box["boxes"]:
                patch.set(facecolor=colors[c.method], alpha=0.45, edgecolor=colors[c.method])
            offsets = [(i / max(c.n - 1, 1) - 0.5) * width * 0.5 for i in range(c.n)]
            ax.scatter([x + o for o in offsets], c.scores, s=9, color=colors[c.method], zorder=3)
        ax.set_xticks(range(len(rates)), [fmt.rate(r) for r in rates])
        ax.set_xlim(-0.6, len(rates) - 0.4)
        ax.set_xlabel("learning rate")
        ax.set_ylabel(_test_label(cells[0].metric))
        ax.set_title(plain(title))
        handles = [Patch(facecolor=colors[m], alpha=0.6, label=plain(m)) for m in methods]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
        return encode(fig)


def dev_curves(
    curves: Mapping[str, MeanCurve], metric: str, colors: Mapping[str, Color], title: str
) -> str:
    """Dev loss and dev metric against training steps, mean over seeds (figs. 5 and 9)."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8, 3.4), layout="constrained")
        loss_ax, metric_ax = fig.subplots(1, 2)
        for method, curve in curves.items():
            color, label = colors[method], plain(method)
            loss_ax.plot(curve.steps, curve.loss, "-o", ms=3, color=color, label=label)
            metric_ax.plot(curve.steps, curve.metric, "-o", ms=3, color=color, label=label)
            low = [m - s for m, s in zip(curve.metric, curve.metric_std, strict=True)]
            high = [m + s for m, s in zip(curve.metric, curve.metric_std, strict=True)]
            metric_ax.fill_between(curve.steps, low, high, color=color, alpha=0.12, lw=0)
        loss_ax.set_ylabel("dev loss")
        metric_ax.set_ylabel(f"dev {plain(fmt.metric(metric))}")
        for ax in (loss_ax, metric_ax):
            ax.set_xlabel("training steps")
        fig.suptitle(plain(title))
        fig.legend(*loss_ax.get_legend_handles_labels(), loc="outside right upper", frameon=False)
        return encode(fig)


def layer_similarity(
    curves: Mapping[str, Sequence[float]], measure: str, colors: Mapping[str, Color], title: str
) -> str:
    """Per-layer similarity of each method's model to its base (paper-effectiveness fig. 2)."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8, 3.4), layout="constrained")
        ax = fig.add_subplot()
        for method, scores in curves.items():
            ax.plot(
                range(len(scores)), scores, "-o", ms=4, color=colors[method], label=plain(method)
            )
        return finished(
            fig, ax, "layer (0 = embeddings)", f"{measure.upper()} against the base model", title
        )


def landscapes(
    curves: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    colors: Mapping[str, Color],
    title: str,
) -> str:
    """Dev loss along theta0 + alpha (theta1 - theta0), one line per method (fig. 6)."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8, 3.4), layout="constrained")
        ax = fig.add_subplot()
        for method, (alphas, losses) in curves.items():
            ax.plot(alphas, losses, "-o", ms=3, color=colors[method], label=plain(method))
        for alpha in (0.0, 1.0):
            ax.axvline(alpha, color="grey", lw=0.8, ls=":")
        return finished(fig, ax, "alpha (0 = start of training, 1 = trained)", "dev loss", title)


def fusion_weights(layers: Mapping[str, Sequence[float]], title: str) -> str:
    """A fusion's mean weight per adapter (rows) and fusion layer (columns), as a heat map."""
    with matplotlib.rc_context({**STYLE, "axes.grid": False}):
        return encode(fusion_figure({plain(a): w for a, w in layers.items()}, plain(title)))


def transfer(
    points: Mapping[str, tuple[float, float, float, float]],
    colors: Mapping[str, Color],
    metric: str,
    target: str,
    title: str,
) -> str:
    """Zero-shot score against in-language score, one point per method (mean ± std over seeds
    on both axes: in-language x, x std, zero-shot y, y std); the diagonal is no loss."""
    y_label = f"zero-shot {plain(metric)} on {plain(target)}"
    return _against(points, colors, f"in-language test {plain(metric)}", y_label, title)


def drift(
    points: Mapping[str, tuple[float, float, float, float]],
    colors: Mapping[str, Color],
    metric: str,
    title: str,
) -> str:
    """Test score on the chronological split against the random split, one point per method
    (mean ± std over seeds on both axes: random x, x std, chronological y, y std); the
    diagonal is no drift, a point below it scores lower on later data."""
    name = plain(fmt.metric(metric))
    return _against(
        points, colors, f"test {name}, random split", f"test {name}, chronological split", title
    )


def _against(
    points: Mapping[str, tuple[float, float, float, float]],
    colors: Mapping[str, Color],
    x_label: str,
    y_label: str,
    title: str,
) -> str:
    """One point per key with error bars on both axes, and the dotted diagonal y = x; a key
    without finite numbers (its runs diverged) has no point."""
    shown = {key: point for key, point in points.items() if len(finite(point)) == len(point)}
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8, 3.8), layout="constrained")
        ax = fig.add_subplot()
        for key, (x, x_std, y, y_std) in shown.items():
            ax.errorbar(
                [x],
                [y],
                xerr=[x_std],
                yerr=[y_std],
                fmt="o",
                ms=7,
                capsize=4,
                color=colors[key],
                label=plain(key),
            )
        ends = [e for x, xs, y, ys in shown.values() for e in (x - xs, y - ys, x + xs, y + ys)]
        low, high = min(ends, default=0.0), max(ends, default=1.0)
        margin = 0.05 * (high - low or 1.0)
        ax.plot(
            [low - margin, high + margin],
            [low - margin, high + margin],
            color="grey",
            lw=0.8,
            ls=":",
        )
        return finished(fig, ax, x_label, y_label, title)


def epoch_curves(
    curves: Mapping[str, tuple[EpochCurve, Sequence[EpochCurve]]],
    metric: str,
    colors: Mapping[str, Color],
    title: str,
) -> str:
    """Dev `metric` against epochs: per method the mean over its runs (seeds) and, faint, each
    run's own curve; a log scale where lower is better (perplexity spans orders of
    magnitude)."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8, 3.4), layout="constrained")
        ax = fig.add_subplot()
        values = []
        for method, ((epochs, mean), runs) in curves.items():
            color = colors[method]
            ax.plot(epochs, mean, "-o", ms=4, color=color, label=plain(method))
            if len(runs) > 1:
                for run_epochs, run_values in runs:
                    ax.plot(run_epochs, run_values, "-", lw=0.8, color=color, alpha=0.3)
            values += [v for _, run_values in runs for v in run_values]
        if metric in LOWER_IS_BETTER and values and min(values) > 0:
            ax.set_yscale("log")
        epochs_seen = sorted({e for (epochs, _), _ in curves.values() for e in epochs})
        ax.set_xticks(epochs_seen, [str(e) for e in epochs_seen])
        return finished(fig, ax, "epoch", f"dev {plain(fmt.metric(metric))}", title)


def _test_label(metric: str) -> str:
    """The y label of a plot of test scores: `test perplexity (lower is better)`."""
    lower = " (lower is better)" if metric in LOWER_IS_BETTER else ""
    return f"test {plain(fmt.metric(metric))}{lower}"


def finished(fig: Figure, ax: Any, x_label: str, y_label: str, title: str) -> str:
    """The figure with its axes labelled, its title and legend, as an SVG data URI."""
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(plain(title))
    legend(ax)
    return encode(fig)


def legend(ax: Any) -> None:
    """The legend beside the axes; none when nothing was drawn (every run diverged)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)


def encode(fig: Figure) -> str:
    """The figure as an SVG data URI (base64 keeps the SVG's own ids and links out of the HTML)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def score_matrix(
    matrix: Sequence[Sequence[float]], stages: Sequence[str], title: str, metric: str
) -> str:
    """A continual-learning matrix as a heat map: rows after stage i, columns tested on stage
    j, each cell written out; cells above the diagonal (not trained yet) are paler. Accuracy
    is coloured on [0, 1]; perplexity on a log scale, the lowest brightest. A NaN or infinite
    cell is written `diverged` and left blank."""
    size = len(stages)
    lower_better = metric in LOWER_IS_BETTER
    values = [value for value in finite(v for row in matrix for v in row) if value > 0]
    norm: Normalize = Normalize(0.0, 1.0)
    if lower_better and values:
        norm = LogNorm(min(values), max(values) * 1.0001)
    with matplotlib.rc_context({**STYLE, "axes.grid": False}):
        fig = Figure(figsize=(1.4 * size + 2.6, 1.0 * size + 1.4), layout="constrained")
        ax = fig.add_subplot()
        image = ax.imshow(matrix, cmap="viridis_r" if lower_better else "viridis", norm=norm)
        for i in range(size):
            for j in range(size):
                value = matrix[i][j]
                bright = 1 - norm(value) if lower_better else norm(value)
                text = f"{value:.1f}" if lower_better else fmt.score(value)
                ax.text(
                    j,
                    i,
                    text if math.isfinite(value) else DIVERGED,
                    ha="center",
                    va="center",
                    color="black" if bright > 0.6 else "white",
                    alpha=0.55 if j > i else 1.0,
                )
        names = [plain(name) for name in stages]
        ax.set_xticks(range(size), names, rotation=20, ha="right")
        ax.set_yticks(range(size), [f"after {name}" for name in names])
        ax.set_xlabel("tested on")
        ax.set_title(plain(title))
        fig.colorbar(image, ax=ax, label=plain(fmt.metric(metric)), shrink=0.8)
        return encode(fig)

"""Numbers of the report: runs grouped over seeds, mean ± std, chosen learning rates,
learning-rate robustness and mean dev curves, each in the metric that judges its data set.
Pure functions, no plotting, no I/O.

A run whose test score in the judging metric is NaN or infinite (it diverged) or missing (it
failed) is counted in its cell but left out of every number: means, choices, curves.

Wherever one score is better than another (the learning rate chosen, the ranking, the best
seed, robustness), a metric where lower is better (perplexity,
`adaptlab.continual.metrics.LOWER_IS_BETTER`) counts the lower score as the better one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from adaptlab.continual.metrics import LOWER_IS_BETTER, gain
from adaptlab.report.judging import Judgement
from adaptlab.report.records import Curve, Run, Setting
from adaptlab.report.spread import DIVERGED, finite, mean_std
from adaptlab.report.spread import mean as finite_mean
from adaptlab.tasks.judging import beats
from adaptlab.tasks.registry import get_task

T = TypeVar("T")


@dataclass(frozen=True)
class Cell:
    """The runs (one per seed) of one method at one learning rate in one setting: their test and
    dev scores in the judging `metric`, and their test scores in the `second` one (if any)."""

    setting: Setting
    method: str
    learning_rate: float | None
    metric: str
    scores: tuple[float, ...]
    dev_scores: tuple[float, ...]
    second: str | None
    second_scores: tuple[float, ...]
    trainable: int
    total: int
    seconds: float | None
    one_class: int | None = None
    """Runs that predicted one class for every test example (failed runs); None when some run
    has no per-class test counts or its task gives examples several classes or none."""
    diverged: int = 0
    """Runs left out because their test score is NaN or infinite."""
    unscored: int = 0
    """Runs left out because they have no test score in the metric."""

    @property
    def n(self) -> int:
        """The runs the numbers are over (those with a finite test score)."""
        return len(self.scores)

    @property
    def left_out(self) -> int:
        return self.diverged + self.unscored

    def left_out_text(self) -> str:
        """`1 diverged`, `2 without a score`, or both."""
        parts = [f"{self.diverged} {DIVERGED}"] if self.diverged else []
        parts += [f"{self.unscored} without a score"] if self.unscored else []
        return ", ".join(parts)

    @property
    def mean(self) -> float:
        return mean_std(self.scores)[0]

    @property
    def std(self) -> float:
        return mean_std(self.scores)[1]

    @property
    def second_mean(self) -> float:
        return mean_std(self.second_scores)[0]

    @property
    def second_std(self) -> float:
        return mean_std(self.second_scores)[1]

    @property
    def dev_mean(self) -> float | None:
        """Mean dev score, or None when some run has no finite one (then selection falls back
        to test)."""
        if not self.dev_scores or len(self.dev_scores) != len(self.scores):
            return None
        return finite_mean(self.dev_scores)

    @property
    def trainable_pct(self) -> float:
        return 100.0 * self.trainable / self.total if self.total else math.nan


EpochCurve = tuple[tuple[int, ...], tuple[float, ...]]
"""Epochs and the dev value of a metric at each."""


@dataclass(frozen=True)
class MeanCurve:
    """Dev loss and dev metric per training step, averaged over the seeds that reached it."""

    steps: tuple[int, ...]
    loss: tuple[float, ...]
    metric: tuple[float, ...]
    metric_std: tuple[float, ...]


def oriented(metric: str, value: float) -> float:
    """`value` of `metric` turned so that higher is better (negated where lower is)."""
    return gain(metric) * value


def score_of(run: Run, metric: str) -> float | None:
    """The run's test score in `metric`; None when it has none or it is NaN or infinite."""
    value = run.test.get(metric)
    return value if value is not None and math.isfinite(value) else None


def first_seen(items: Iterable[T], key: Callable[[T], Hashable]) -> dict[Hashable, int]:
    """Rank of each key by first appearance: keeps the study's own order of data and methods."""
    order: dict[Hashable, int] = {}
    for item in items:
        order.setdefault(key(item), len(order))
    return order


def settings(runs: Sequence[Run]) -> list[Setting]:
    """Distinct settings: data sets and models in study order, training sizes ascending."""
    data = first_seen(runs, lambda r: r.setting.data)
    models = first_seen(runs, lambda r: r.setting.model)
    found = {r.setting for r in runs}
    return sorted(found, key=lambda s: (data[s.data], models[s.model], s.train_size, s.full))


def group_cells(runs: Sequence[Run], judged: Mapping[str, Judgement]) -> list[Cell]:
    """Runs grouped by (setting, method, learning rate), scored as `judged` says for their
    data set: settings in order, then methods in study order, then learning rates ascending."""
    groups: dict[tuple[Setting, str, float | None], list[Run]] = {}
    for run in runs:
        groups.setdefault((run.setting, run.method, run.learning_rate), []).append(run)
    rank = {s: i for i, s in enumerate(settings(runs))}
    methods = first_seen(runs, lambda r: r.method)
    keys = sorted(groups, key=lambda k: (rank[k[0]], methods[k[1]], _rate_key(k[2])))
    return [_cell(groups[key], judged[key[0].data]) for key in keys]


def _rate_key(rate: float | None) -> float:
    return -math.inf if rate is None else rate


def _cell(runs: Sequence[Run], judged: Judgement) -> Cell:
    metric, second = judged.metric, judged.second
    kept = [r for r in runs if score_of(r, metric) is not None]
    first = runs[0]
    walls = finite(r.wall_seconds for r in runs)
    return Cell(
        setting=first.setting,
        method=first.method,
        learning_rate=first.learning_rate,
        metric=metric,
        scores=tuple(r.test[metric] for r in kept),
        dev_scores=tuple(finite(r.dev.get(metric) for r in kept)),
        second=second,
        second_scores=tuple(finite(r.test.get(second) for r in kept)) if second else (),
        trainable=first.trainable,
        total=first.total,
        seconds=statistics.median(walls) if walls else None,
        one_class=_one_class_runs(kept),
        diverged=sum(r.test.get(metric) is not None for r in runs) - len(kept),
        unscored=sum(r.test.get(metric) is None for r in runs),
    )


def _one_class_runs(runs: Sequence[Run]) -> int | None:
    """How many runs put every test example in one class, where each example is given one
    (None if unknown, or for tasks that give examples several or none)."""
    if any(not get_task(r.task).one_class_each or not r.test_classes for r in runs):
        return None
    return sum(sum(c.predicted > 0 for c in r.test_classes or ()) == 1 for r in runs)


def chosen(cells: Sequence[Cell]) -> list[Cell]:
    """Per (setting, method), the learning rate with the best mean dev score (test when a cell
    has no dev score); ties (`scores_tie`) go to the first, i.e. the lowest rate. Keeps the
    cells' order."""
    best: dict[tuple[Setting, str], Cell] = {}
    for cell in cells:
        key = (cell.setting, cell.method)
        if key not in best or beats(_selection_score(cell), _selection_score(best[key])):
            best[key] = cell
    return [cell for cell in cells if best[(cell.setting, cell.method)] is cell]


def _selection_score(cell: Cell) -> float:
    """The mean dev score (test without one), higher better; below every score when the cell
    has none."""
    dev = cell.dev_mean
    score = dev if dev is not None else cell.mean
    return oriented(cell.metric, score) if math.isfinite(score) else -math.inf


def ranked(cells: Sequence[Cell]) -> list[Cell]:
    """The cells with a score by mean test score, best first (the lowest first where lower is
    better; stable: study order breaks ties); cells whose every run diverged or failed are
    left out."""
    return sorted(scored(cells), key=lambda c: -oriented(c.metric, c.mean))


def best_run(runs: Sequence[Run], metric: str) -> Run:
    """The run (seed) with the best dev score in `metric` (test score where dev has no finite
    one); `runs` have finite test scores (`runs_of`)."""
    return max(runs, key=lambda r: oriented(metric, _dev_or_test(r, metric)))


def _dev_or_test(run: Run, metric: str) -> float:
    dev = run.dev.get(metric)
    return dev if dev is not None and math.isfinite(dev) else run.test[metric]


def scored(cells: Sequence[Cell]) -> list[Cell]:
    """The cells with at least one finite test score, in order."""
    return [c for c in cells if c.n]


def robustness(cells: Sequence[Cell]) -> float | None:
    """Mean over learning rates of the mean score, divided by the best mean score; where lower
    is better, the best (lowest) mean score divided by the mean over learning rates.

    1.0 means every learning rate tried does as well as the best one. None with fewer than two
    learning rates that have a score, or when the best mean is not positive (the ratio then
    means nothing).
    """
    found = scored(cells)
    means = [c.mean for c in found]
    if len({c.learning_rate for c in found}) < 2:
        return None
    if found[0].metric in LOWER_IS_BETTER:
        return min(means) / statistics.fmean(means) if min(means) > 0 else None
    return statistics.fmean(means) / max(means) if max(means) > 0 else None


def mean_curve(runs: Sequence[Run], metric: str) -> MeanCurve | None:
    """Mean over runs (seeds) of the dev loss and dev `metric` curves, step by step; None when
    no run has epochs."""
    by_step: dict[int, list[tuple[float, float]]] = {}
    for run in runs:
        for epoch in run.curve:
            point = (epoch.dev_loss, epoch.dev_metrics.get(metric, math.nan))
            by_step.setdefault(epoch.step, []).append(point)
    if not by_step:
        return None
    steps = sorted(by_step)
    stats = [
        (mean_std([v[0] for v in by_step[s]])[0], *mean_std([v[1] for v in by_step[s]]))
        for s in steps
    ]
    return MeanCurve(
        steps=tuple(steps),
        loss=tuple(s[0] for s in stats),
        metric=tuple(s[1] for s in stats),
        metric_std=tuple(s[2] for s in stats),
    )


def epoch_curve(run: Run, metric: str) -> EpochCurve | None:
    """The run's dev `metric` at each epoch that recorded a finite value; None when none did."""
    points = [
        (epoch.epoch, epoch.dev_metrics[metric])
        for epoch in run.curve
        if math.isfinite(epoch.dev_metrics.get(metric, math.nan))
    ]
    if not points:
        return None
    return tuple(p[0] for p in points), tuple(p[1] for p in points)


def mean_epoch_curve(runs: Sequence[Run], metric: str) -> EpochCurve | None:
    """Mean over runs (seeds) of the dev `metric` at each epoch some run recorded it finite;
    None when no run did."""
    by_epoch: dict[int, list[float]] = {}
    for run in runs:
        for epoch, value in zip(*(epoch_curve(run, metric) or ((), ())), strict=True):
            by_epoch.setdefault(epoch, []).append(value)
    if not by_epoch:
        return None
    epochs = sorted(by_epoch)
    return tuple(epochs), tuple(statistics.fmean(by_epoch[e]) for e in epochs)


def method_curves(
    chosen: Mapping[str, Sequence[Run]], metric: str
) -> dict[str, tuple[EpochCurve, list[EpochCurve]]]:
    """Per method with a dev `metric` recorded: its mean curve over its runs and each run's own
    (what `plots.epoch_curves` draws)."""
    curves: dict[str, tuple[EpochCurve, list[EpochCurve]]] = {}
    for method, runs in chosen.items():
        mean = mean_epoch_curve(runs, metric)
        if mean is not None:
            each = [curve for run in runs if (curve := epoch_curve(run, metric)) is not None]
            curves[method] = (mean, each)
    return curves


def runs_of(runs: Sequence[Run], cell: Cell) -> list[Run]:
    """The runs that make up `cell`'s numbers: its runs with a finite test score."""
    return [
        r
        for r in runs
        if (r.setting, r.method, r.learning_rate) == (cell.setting, cell.method, cell.learning_rate)
        and score_of(r, cell.metric) is not None
    ]


def mean_layer_scores(runs: Sequence[Run], measure: str) -> tuple[float, ...] | None:
    """Per-layer `measure` averaged over the runs (seeds) that recorded it; None if none did."""
    rows = [dict(r.layer_scores)[measure] for r in runs if measure in dict(r.layer_scores)]
    if not rows or len({len(row) for row in rows}) != 1:
        return None
    return tuple(finite_mean(values) for values in zip(*rows, strict=True))


def mean_landscape(runs: Sequence[Run]) -> Curve | None:
    """The loss landscape averaged over the runs that recorded one on the same alphas."""
    curves = [r.landscape for r in runs if r.landscape is not None]
    if not curves or len({c[0] for c in curves}) != 1:
        return None
    losses = tuple(finite_mean(v) for v in zip(*(c[1] for c in curves), strict=True))
    return curves[0][0], losses


def mean_fusion_weights(runs: Sequence[Run]) -> dict[str, tuple[float, ...]] | None:
    """Each fused adapter's weight per layer, averaged over the runs that fused the same ones."""
    fused = [dict(r.fusion) for r in runs if r.fusion]
    if not fused or len({tuple(f) for f in fused}) != 1:
        return None
    return {
        adapter: tuple(finite_mean(v) for v in zip(*(f[adapter] for f in fused), strict=True))
        for adapter in fused[0]
    }

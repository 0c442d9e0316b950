"""The report's temporal-drift section: the same runs on a random split and on a chronological
split of the same data.

A random split puts examples of every period in training and in test, so its test score says
how a model does on the period it learnt from; a chronological split (earliest 80% train,
latest 10% test, `adaptlab.data.chronology`) says how it does on what comes later. Runs are
paired when their specs are equal except for how their data was split (`Run.split_free_spec`:
`slovenian-opinions-chronological` pairs with `slovenian-opinions`, a `split: chronological`
data entry with the same entry split at random), seed with seed. Per method and learning rate:
the test scores on both splits (mean ± std over the paired seeds) and the drift, random minus
chronological per seed, then mean ± std; the chronological split's cut dates; and a plot of
chronological against random score, one point per method.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import adaptlab.report.formatting as fmt
import adaptlab.report.plots as plots
from adaptlab.report.aggregate import oriented
from adaptlab.report.markup import Html, figure, note, section, table, tag
from adaptlab.report.records import Run, Setting
from adaptlab.report.spread import mean_std, spread_text
from adaptlab.report.view import StudyView

LEAD = (
    "Runs that differ only in how their data was split: at random (every period in training "
    "and test) or by time (the earliest 80% train, the next 10% dev, the latest 10% test). "
    "Drift = random-split minus chronological-split test score, per seed (the other way round "
    "where lower is better, as perplexity); a positive drift "
    "means a random split overstates how the model does on later data. Mean ± std over the "
    "seeds run on both splits, in the metric that judges the randomly split data and the one "
    "shown beside it; in the plot, a point below the dotted diagonal scores lower on the "
    "chronological split."
)


@dataclass(frozen=True)
class Comparison:
    """One method at one learning rate, on a random and on a chronological split of the same
    data: its (random run, chronological run) pairs, one per seed, in the runs' order."""

    random: Setting
    chronological: Setting
    method: str
    learning_rate: float | None
    pairs: tuple[tuple[Run, Run], ...]

    def scores(self, metric: str) -> tuple[list[float], list[float], list[float]]:
        """Per seed: random-split and chronological-split test `metric`, and the drift, their
        difference taken so that a positive drift is the random split's overstatement
        (chronological minus random where lower is better; NaN where a run lacks the
        metric)."""
        random = [r.test.get(metric, float("nan")) for r, _ in self.pairs]
        later = [c.test.get(metric, float("nan")) for _, c in self.pairs]
        return random, later, [oriented(metric, a - b) for a, b in zip(random, later, strict=True)]


def comparisons(runs: Sequence[Run]) -> list[Comparison]:
    """The runs that have a twin on the other split, grouped over seeds, in the runs' order."""
    random: dict[str, Run] = {}
    chronological: dict[str, Run] = {}
    for run in runs:
        side = chronological if run.split == "chronological" else random
        side.setdefault(run.split_free_spec, run)
    groups: dict[tuple[Setting, Setting, str, float | None], list[tuple[Run, Run]]] = {}
    for key, run in random.items():
        twin = chronological.get(key)
        if twin is not None:
            group = (run.setting, twin.setting, run.method, run.learning_rate)
            groups.setdefault(group, []).append((run, twin))
    return [Comparison(*group, tuple(pairs)) for group, pairs in groups.items()]


def temporal(view: StudyView) -> Html:
    """Absent unless some run has a twin on the other split."""
    found = comparisons(view.runs)
    if not found:
        return Html("")
    colors = plots.palette(view.methods)
    parts = [tag("p", LEAD, class_="lead")]
    for random, chronological in dict.fromkeys((c.random, c.chronological) for c in found):
        mine = [c for c in found if (c.random, c.chronological) == (random, chronological)]
        judged = view.judged[random.data]
        metrics = [judged.metric] + ([judged.second] if judged.second else [])
        title = f"{random.label(view.with_model)} against {chronological.data}"
        parts += [tag("h3", title), _cuts(mine), _table(mine, metrics)]
        parts.append(_figure(mine, metrics[0], colors, title))
    return section("temporal", "Temporal drift: random against chronological split", *parts)


def _cuts(mine: Sequence[Comparison]) -> Html:
    """The chronological split's periods, as its runs stored them."""
    stored = dict.fromkeys(
        f"split by {c.time_split.column}: {c.time_split.spans()}"
        for comparison in mine
        for _, c in comparison.pairs
        if c.time_split is not None
    )
    if not stored:
        return note("Cut dates: not stored with these runs (written before adaptlab kept them).")
    return tag("p", "Chronological " + " | ".join(stored) + ".")


def _table(mine: Sequence[Comparison], metrics: Sequence[str]) -> Html:
    headers = ["method", "learning rate", "seeds"]
    for metric in metrics:
        name = fmt.metric(metric)
        headers += [f"random {name}", f"chronological {name}", f"drift {name}"]
    rows = []
    for comparison in mine:
        cells = [spread_text(values) for metric in metrics for values in comparison.scores(metric)]
        rows.append(
            [
                comparison.method,
                fmt.rate(comparison.learning_rate),
                len(comparison.pairs),
                *cells,
            ]
        )
    return table(headers, rows)


def _figure(
    mine: Sequence[Comparison], metric: str, colors: dict[str, plots.Color], title: str
) -> Html:
    """Chronological against random score, a point per method (and learning rate, where a
    method was run at several)."""
    several = {c.method for c in mine if sum(d.method == c.method for d in mine) > 1}
    points, point_colors = {}, {}
    for comparison in mine:
        name = comparison.method
        if name in several:
            name += f" @ {fmt.rate(comparison.learning_rate)}"
        random, later, _ = comparison.scores(metric)
        points[name] = (*mean_std(random), *mean_std(later))
        point_colors[name] = colors[comparison.method]
    return figure(
        plots.drift(points, point_colors, metric, title),
        f"chronological-split {fmt.metric(metric)} against random-split {fmt.metric(metric)}, "
        f"{title}",
    )

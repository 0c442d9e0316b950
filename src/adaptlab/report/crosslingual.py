"""The report's cross-lingual transfer section: in-language score against zero-shot score.

He et al. 2021 §4 and the MultiEURLEX slides claim that methods which change few parameters
keep a multilingual model's zero-shot transfer better than full fine-tuning. For every study
with `zero_shot` targets, per setting and target: each method's in-language test scores and
its zero-shot scores on the target (mean ± std over seeds, at its chosen learning rate), the
gap between them (in-language minus zero-shot, per seed, then mean ± std), and a plot of
zero-shot against in-language score, one point per method.
"""

from __future__ import annotations

from collections.abc import Sequence

import adaptlab.report.plots as plots
from adaptlab.report.aggregate import runs_of
from adaptlab.report.markup import Html, figure, section, table, tag
from adaptlab.report.records import Run
from adaptlab.report.spread import mean_std, spread_text
from adaptlab.report.view import StudyView

LEAD = (
    "Each run trained on the setting's data is also tested, with no training on it, on the "
    "test split of each zero-shot target (labels matched by name; for stacked methods with a "
    "swap, the target language's adapter runs in place of the source language's). Gap = "
    "in-language minus zero-shot score, per seed. Mean ± std over seeds, each method at its "
    "chosen learning rate, in the metric that judges the setting's data and the one shown "
    "beside it; in the plot the dotted diagonal is no loss in transfer."
)


def crosslingual(view: StudyView) -> Html:
    """Absent unless some run was scored zero-shot."""
    parts = [tag("p", LEAD, class_="lead")]
    colors = plots.palette(view.methods)
    for setting in view.settings:
        label = setting.label(view.with_model)
        by_method = {c.method: runs_of(view.runs, c) for c in view.chosen_in(setting)}
        every = [s.name for runs in by_method.values() for r in runs for s in r.zero_shot]
        for target in dict.fromkeys(every):
            scored = {
                method: runs
                for method, runs in by_method.items()
                if runs and all(_zero_shot(r, target) is not None for r in runs)
            }
            if scored:
                judged = view.judged[setting.data]
                metrics = [judged.metric] + ([judged.second] if judged.second else [])
                parts += _target(scored, target, metrics, f"{label} → {target}", colors)
    if len(parts) == 1:
        return Html("")
    return section("crosslingual", "Cross-lingual transfer: in-language against zero-shot", *parts)


def _target(
    scored: dict[str, list[Run]],
    target: str,
    metrics: Sequence[str],
    title: str,
    colors: dict[str, plots.Color],
) -> list[Html]:
    """The heading, table and plot of one setting's transfer to one target, in `metrics` (the
    judging metric first, then the one shown beside it)."""
    metric = metrics[0]
    headers = ["method", "seeds"]
    for name in metrics:
        headers += [f"in-language {name}", f"zero-shot {name}", f"gap {name}"]
    rows = [[m, len(runs), *_cells(runs, target, metrics)] for m, runs in scored.items()]
    points = {method: _point(runs, target, metric) for method, runs in scored.items()}
    return [
        tag("h3", title),
        table(headers, rows),
        figure(
            plots.transfer(points, colors, metric, target, title),
            f"zero-shot {metric} on {target} against in-language {metric}, {title}",
        ),
    ]


def _zero_shot(run: Run, target: str) -> dict[str, float] | None:
    """The run's zero-shot metrics on `target`, if it was scored there."""
    return next((dict(s.metrics) for s in run.zero_shot if s.name == target), None)


def _scores(runs: Sequence[Run], target: str, metric: str) -> tuple[list[float], list[float]]:
    """Per seed: in-language and zero-shot value of `metric` (NaN where it is missing)."""
    inside = [r.test.get(metric, float("nan")) for r in runs]
    outside = [(_zero_shot(r, target) or {}).get(metric, float("nan")) for r in runs]
    return inside, outside


def _cells(runs: Sequence[Run], target: str, metrics: Sequence[str]) -> list[str]:
    cells = []
    for metric in metrics:
        inside, outside = _scores(runs, target, metric)
        gaps = [a - b for a, b in zip(inside, outside, strict=True)]
        cells += [spread_text(values) for values in (inside, outside, gaps)]
    return cells


def _point(runs: Sequence[Run], target: str, metric: str) -> tuple[float, float, float, float]:
    inside, outside = _scores(runs, target, metric)
    return (*mean_std(inside), *mean_std(outside))

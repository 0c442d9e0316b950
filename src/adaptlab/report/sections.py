"""The report's sections, each a function of the study view returning escaped HTML.

A section whose data is absent (a single training size, a single learning rate) is replaced
by a one-line note rather than an empty plot.
"""

from __future__ import annotations

import math

import adaptlab.report.formatting as fmt
import adaptlab.report.plots as plots
from adaptlab.report.aggregate import Cell, oriented, scored
from adaptlab.report.markup import Html, figure, join, note, section, table, tag
from adaptlab.report.recommend import ALPHA, TEST_NAME, sentence
from adaptlab.report.records import Setting
from adaptlab.report.spread import DIVERGED, finite
from adaptlab.report.view import StudyView
from adaptlab.tasks.judging import scores_tie

CHOSEN = "Each method's learning rate is chosen by its mean dev score in the judging metric"
PROTOCOL = (
    CHOSEN + "; ★ marks the method with "
    "the best mean test score at its chosen learning rate, every one of them where several tie "
    "on it (● marks the chosen rate when a method was run at several). ± is the sample "
    "standard deviation over seeds."
)


def judged_by(view: StudyView) -> Html:
    """One line under the title: the metric judging each data set, and why."""
    parts = [
        f"{fmt.metric(j.metric)} on {j.data} ({j.choice.reason})" for j in view.judged.values()
    ]
    return tag("p", "Methods are judged by " + "; ".join(parts) + ".", class_="judged")


def what_to_use(view: StudyView) -> Html:
    """The verdict per setting: winner, margin over the runner-up, and whether it is noise."""
    items = [tag("li", sentence(view.verdict(s), view.with_model)) for s in view.settings]
    how = (
        f"A gap counts as larger than the spread over seeds when a {TEST_NAME} on the per-seed "
        f"test scores of the two methods gives p < {ALPHA}. " + CHOSEN + "."
    )
    return section(
        "what-to-use", "What to use", tag("ul", join(items), class_="verdicts"), note(how)
    )


def results(view: StudyView) -> Html:
    """Per setting: mean ± std of the test metric per method and learning rate, best marked."""
    parts = [tag("p", PROTOCOL, class_="lead")]
    for setting in view.settings:
        parts += [tag("h3", setting.label(view.with_model)), _results_table(view, setting)]
    return section("results", "Results", *parts)


def _results_table(view: StudyView, setting: Setting) -> Html:
    leaders = view.verdict(setting).leaders
    cells = view.cells_in(setting)
    starred = [any(c is leader for leader in leaders) for c in cells]
    several = {c.method for c in cells if len(view.rates_of(setting, c.method)) > 1}
    second = cells[0].second
    rows = [
        [
            ("★\u00a0" if star else "") + c.method,
            fmt.rate(c.learning_rate) + (" ●" if c.method in several and view.is_chosen(c) else ""),
            f"{c.n} of {c.n + c.left_out}" if c.left_out else c.n,
            _test_cell(c),
            *([fmt.score_pm(c.second_mean, c.second_std) if c.n else "–"] if second else []),
            fmt.score(c.dev_mean) if c.dev_mean is not None else "n/a",
            fmt.count(c.trainable),
            fmt.percent(c.trainable_pct),
            fmt.seconds(c.seconds),
        ]
        for c, star in zip(cells, starred, strict=True)
    ]
    metric = fmt.metric(cells[0].metric)
    headers = ["method", "learning rate", "seeds", f"test {metric}"]
    headers += [f"test {fmt.metric(second)}"] if second else []
    headers += [f"dev {metric}", "trainable", "trainable %", "time / run"]
    parts = [table(headers, rows, ["best" if star else "" for star in starred])]
    left = sum(c.left_out for c in cells)
    if left:
        parts.append(note(f"{left} run{'s' if left > 1 else ''} {LEFT_OUT}"))
    return join(parts)


LEFT_OUT = (
    "left out of the means and of choosing: a diverged run's test score is NaN or infinite, a "
    "failed run has none."
)


def _test_cell(cell: Cell) -> str:
    """Mean ± std of the cell's test scores, with how many runs were left out; `diverged` (or
    `no score`) when none is left."""
    if not cell.n:
        return DIVERGED if cell.diverged else "no score"
    text = fmt.score_pm(cell.mean, cell.std)
    return text + (f" ({cell.left_out_text()}, left out)" if cell.left_out else "")


def efficiency(view: StudyView) -> Html:
    """Test score against trainable parameters (log scale), one point per method."""
    colors = plots.palette(view.methods)
    figures = []
    for setting in view.settings:
        label = setting.label(view.with_model)
        uri = plots.efficiency(view.chosen_in(setting), colors, label)
        figures.append(figure(uri, f"test score against trainable parameters, {label}"))
    lead = tag(
        "p", "Mean ± std over seeds, each method at its chosen learning rate.", class_="lead"
    )
    return section("efficiency", "Score against trainable parameters", lead, *figures)


def training_size(view: StudyView) -> Html:
    """Test score against the number of training examples (paper fig. 3), per data set."""
    title = "Score against training size"
    lines = [(m, d) for m, d in view.data_lines() if len(view.sizes_of(m, d)) > 1]
    if not lines:
        return section(
            "training-size", title, note("Left out: every data set has one training size.")
        )
    colors = plots.palette(view.methods)
    parts = [tag("p", "Does the gap between methods close as training data grows?", class_="lead")]
    for model, data in view.data_lines():
        name = f"{data} · {model}" if view.with_model else data
        if (model, data) not in lines:
            parts.append(note(f"{name}: one training size only, no curve."))
            continue
        cells = [c for s in view.sizes_of(model, data) for c in view.chosen_in(s)]
        uri = plots.training_size(cells, colors, name)
        parts.append(figure(uri, f"test score against training examples, {name}"))
    return section("training-size", title, *parts)


def learning_rate(view: StudyView) -> Html:
    """Box plots per learning rate and method (paper fig. 4) and a robustness number per method."""
    title = "Learning-rate robustness"
    found = [s for s in view.settings if len(view.rates_in(s)) > 1]
    if not found:
        return section(
            "learning-rate", title, note("Left out: every setting has one learning rate.")
        )
    colors = plots.palette(view.methods)
    parts = [tag("p", ROBUSTNESS, class_="lead")]
    for setting in view.settings:
        label = setting.label(view.with_model)
        if setting not in found:
            parts.append(note(f"{label}: one learning rate only."))
            continue
        uri = plots.learning_rates(view.cells_in(setting), colors, label)
        parts += [figure(uri, f"test score per learning rate, {label}"), _robustness(view, setting)]
    return section("learning-rate", title, *parts)


ROBUSTNESS = (
    "Robustness = mean over learning rates of the mean test score, divided by the best mean "
    "test score (where lower is better, as perplexity, the best mean divided by the mean over "
    "learning rates): 1.0 means every learning rate tried is as good as the best one. A failed run "
    "predicts one class for every test example (its accuracy is that class's share), or has "
    "a test score that is NaN or infinite (it diverged) or missing."
)


def _robustness(view: StudyView, setting: Setting) -> Html:
    rows = []
    for method in view.methods:
        cells = [c for c in view.cells_in(setting) if c.method == method]
        if not cells:
            continue
        value = view.robustness(setting, method)
        found = scored(cells)
        best = max(found, key=lambda c: oriented(c.metric, c.mean), default=None)
        worst = min(found, key=lambda c: oriented(c.metric, c.mean), default=None)
        rows.append(
            [
                method,
                len(cells),
                "n/a (one rate)" if value is None else f"{value:.3f}",
                _at(best),
                _at(worst),
                _failed_runs(cells),
            ]
        )
    headers = ["method", "learning rates", "robustness", "best mean", "worst mean", "failed runs"]
    return table(headers, rows)


def _at(cell: Cell | None) -> str:
    """`mean @ rate`, or `diverged` when no rate of the method has a score."""
    return DIVERGED if cell is None else f"{fmt.score(cell.mean)} @ {fmt.rate(cell.learning_rate)}"


def _failed_runs(cells: list[Cell]) -> str:
    """Runs that predicted one class, diverged or have no score, of all the method's runs."""
    total = sum(c.n + c.left_out for c in cells)
    left = sum(c.left_out for c in cells)
    one_class = [c.one_class for c in cells if c.n]
    if None in one_class:
        return f"{left} of {total} ({DIVERGED} or without a score)" if left else "n/a"
    return f"{sum(f or 0 for f in one_class) + left} of {total}"


def overfitting(view: StudyView) -> Html:
    """Dev loss and dev metric against training steps per method (paper figs. 5 and 9)."""
    title = "Overfitting: dev curves"
    colors = plots.palette(view.methods)
    parts = [tag("p", CURVES, class_="lead")]
    for setting in view.settings:
        label = setting.label(view.with_model)
        curves = view.curves(setting)
        uri = plots.dev_curves(curves, view.chosen_in(setting)[0].metric, colors, label)
        parts.append(figure(uri, f"dev loss and dev metric against training steps, {label}"))
    return section("overfitting", title, *parts)


CURVES = (
    "Mean over seeds at each method's chosen learning rate (band: ± std of the dev metric). "
    "A dev loss that climbs while training goes on is overfitting."
)


def analysis(view: StudyView) -> Html:
    """Per-layer RSA / CKA against the base (paper-effectiveness fig. 2) and loss landscapes
    (fig. 6), when the study asked for them (`analysis:` in the spec); absent otherwise."""
    if not view.measures and not view.has_landscapes:
        return Html("")
    colors = plots.palette(view.methods)
    parts = [tag("p", ANALYSIS, class_="lead")]
    for setting in view.settings:
        label = setting.label(view.with_model)
        for measure in view.measures:
            curves = view.layer_curves(setting, measure)
            if curves:
                uri = plots.layer_similarity(curves, measure, colors, label)
                parts.append(figure(uri, f"per-layer {measure} against the base model, {label}"))
        landscapes = view.landscapes(setting)
        if landscapes:
            uri = plots.landscapes(landscapes, colors, label)
            parts.append(figure(uri, f"dev loss along the training direction, {label}"))
    return section("analysis", "What adaptation changed", *parts)


ANALYSIS = (
    "Each method's trained model against its own base (adaptation switched off) on the same "
    "dev tokens, per layer: 1.0 means the representation is unchanged. Landscapes: dev loss at "
    "θ0 + α (θ1 − θ0) over the trained parameters (α 0 = start, 1 = trained); a wide, flat "
    "valley suggests better generalisation. Means over seeds at each method's chosen learning "
    "rate."
)


def transferability(view: StudyView) -> Html:
    """How well each transferability estimator predicted this store's fine-tuned scores
    (`adaptlab rank --validate`); absent when no validation was saved."""
    if not view.validations:
        return Html("")
    parts = [tag("p", TRANSFERABILITY, class_="lead")]
    for saved in view.validations:
        found = saved.validation
        what = "per-layer candidates" if saved.kind == "layers" else "candidates"
        parts.append(tag("h3", f"{found.data} · {what}"))
        agreements = found.agreements
        taus = {n: a.kendall_tau for n, a in agreements.items() if a.kendall_tau is not None}
        top = max(taus.values(), default=math.nan)
        best = {name for name, tau in taus.items() if scores_tie(tau, top)}
        rows = [
            [
                ("★\u00a0" if name in best else "") + name,
                *(_signed(v) for v in (a.kendall_tau, a.weighted_tau, a.pearson)),
                a.candidates,
            ]
            for name, a in agreements.items()
        ]
        headers = ["estimator", "Kendall τ", "weighted τ", "Pearson r", "candidates"]
        parts.append(table(headers, rows, ["best" if name in best else "" for name in agreements]))
        scores = [
            [fmt.candidate(name), fmt.score(fine_tuned), *(f"{v:.4g}" for v in values)]
            for name, fine_tuned, values in found.ranked()
        ]
        parts.append(table(["candidate", "fine-tuned test", *agreements], scores))
    return section("transferability", "Picking the model before training", *parts)


TRANSFERABILITY = (
    "Transferability estimators score each candidate from its frozen features "
    "(adaptlab rank); here each estimator's scores are correlated with the candidates' mean "
    "fine-tuned test scores in this store. ★ marks the highest Kendall τ (every estimator that "
    "ties on it); τ and r near 1 mean "
    "the estimator would have picked the model fine-tuning found best. A dash is undefined "
    "(fewer than 3 candidates, or constant scores)."
)


def _signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.3f}"


def footer(view: StudyView, title: str) -> Html:
    """Study name, run count, models, versions and hosts, for provenance."""
    runs = view.runs
    seconds = finite(r.wall_seconds for r in runs)
    facts = [
        ("report", title),
        ("study", ", ".join(dict.fromkeys(r.study for r in runs if r.study)) or "n/a"),
        ("runs", f"{len(runs)} ({fmt.seconds(sum(seconds)) if seconds else 'n/a'} of training)"),
        ("models", ", ".join(dict.fromkeys(r.setting.model for r in runs))),
        ("data", ", ".join(dict.fromkeys(r.setting.data for r in runs))),
        ("versions", "; ".join(dict.fromkeys(_versions(r.versions) for r in runs)) or "n/a"),
        ("hosts", ", ".join(dict.fromkeys(r.host for r in runs if r.host)) or "n/a"),
    ]
    rows = join(join([tag("dt", k), tag("dd", v)]) for k, v in facts)
    return tag("footer", tag("dl", rows))


def _versions(pairs: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{name} {version}" for name, version in pairs)

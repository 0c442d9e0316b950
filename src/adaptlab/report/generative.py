"""The report's section on the runs of generative tasks (`causal-lm`, `sft`, `chat`): per
setting, each method's dev perplexity over the epochs (mean over seeds at its chosen learning
rate, each run faint beside it), the examples left out because their answer did not fit, and a
sample of test generations: each prompt with its reference and every method's answer from its
best run (the seed with the best dev score in the judging metric, at its chosen learning rate).
Generated text is a model's output: it is escaped like every text of the report (`markup`) and
cut to `PREVIEW` characters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import adaptlab.report.plots as plots
from adaptlab.report.aggregate import best_run, method_curves
from adaptlab.report.markup import Html, figure, note, section, table, tag
from adaptlab.report.records import Run, Setting
from adaptlab.report.view import StudyView
from adaptlab.tasks.generative import GenerativeTask
from adaptlab.tasks.generative_facts import PERPLEXITY

PREVIEW = 500
"""The most characters of a prompt (its end), generation or reference (its start) shown."""

LEAD = (
    "Dev perplexity of the target tokens after each epoch (lower is better; log scale): per "
    "method the mean over seeds at its chosen learning rate, each run faint beside it when "
    "there are several. Below, the first test prompts with their reference and each method's "
    "answer, from its best run (the seed with the best dev score in the judging metric)."
)


def generative(view: StudyView) -> Html:
    """The section, or nothing when the study has no setting of a generative task."""
    colors = plots.palette(view.methods)
    parts: list[Html] = []
    for setting in view.settings_of(GenerativeTask):
        chosen = view.chosen_runs(setting)
        label = setting.label(view.with_model)
        shown = [
            *_curves(chosen, colors, label),
            *_dropped(view, setting),
            *_sample(chosen, view.judged[setting.data].metric),
        ]
        if shown:
            parts += [tag("h3", label), *shown]
    if not parts:
        return Html("")
    lead = tag("p", LEAD, class_="lead")
    return section("generative", "Generative runs: perplexity and generations", lead, *parts)


def _curves(
    chosen: Mapping[str, Sequence[Run]], colors: dict[str, plots.Color], label: str
) -> list[Html]:
    """The dev-perplexity figure of a setting (none when no run recorded dev perplexity)."""
    curves = method_curves(chosen, PERPLEXITY)
    if not curves:
        return []
    uri = plots.epoch_curves(curves, PERPLEXITY, colors, label)
    return [figure(uri, f"dev perplexity against epochs, {label}")]


def _dropped(view: StudyView, setting: Setting) -> list[Html]:
    """A note on the examples left out because their answer did not fit (the most any run of
    the setting left out, per split)."""
    counts = [run.dropped for run in view.runs if run.setting == setting and run.dropped]
    splits = dict.fromkeys(split for c in counts for split in c)
    most = {split: max(c.get(split, 0) for c in counts) for split in splits}
    if not any(most.values()):
        return []
    listed = ", ".join(f"{count:,} {split}" for split, count in most.items())
    return [
        note(
            f"Examples left out because their answer did not fit the maximum length: up to "
            f"{listed} in a run."
        )
    ]


def _sample(chosen: Mapping[str, Sequence[Run]], metric: str) -> list[Html]:
    """Each prompt of the best runs' samples, its reference and each method's answer."""
    best = {method: best_run(runs, metric) for method, runs in chosen.items()}
    best = {method: run for method, run in best.items() if run.generations}
    if not best:
        return []
    answers = {
        method: {item.prompt: item.generation for item in run.generations}
        for method, run in best.items()
    }
    references: dict[str, str] = {}
    for run in best.values():
        for item in run.generations:
            references.setdefault(item.prompt, item.reference)
    rows = [
        [
            _cut(prompt, keep_end=True),
            _cut(reference),
            *(_answer(answers[method].get(prompt)) for method in best),
        ]
        for prompt, reference in references.items()
    ]
    runs = "; ".join(
        f"{method}: seed {run.seed} (run {run.run_id})" for method, run in best.items()
    )
    return [
        tag("div", table(["prompt", "reference", *best], rows), class_="generations"),
        note(f"Answers from each method's best run: {runs}."),
    ]


def _answer(text: str | None) -> str:
    """A method's answer to a prompt: `–` where its run has none, `(empty)` for nothing."""
    if text is None:
        return "–"
    return _cut(text) if text else "(empty)"


def _cut(text: str, keep_end: bool = False) -> str:
    """`text` cut to `PREVIEW` characters, `…` where it was cut (keeping a prompt's end, where
    the question is)."""
    if len(text) <= PREVIEW:
        return text
    return "…" + text[-PREVIEW:] if keep_end else text[:PREVIEW] + "…"

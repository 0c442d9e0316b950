"""The report's section on preference-tuning runs (`dpo`, `simpo`, `orpo`, `kto`): per setting,
each method's test reward accuracy and reward margin (mean ± spread over seeds at its chosen
learning rate), the chosen and rejected answers' log-probabilities, and the dev reward accuracy
and margin after each epoch (the mean over seeds, each run faint beside it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import adaptlab.report.plots as plots
from adaptlab.report.aggregate import method_curves
from adaptlab.report.markup import Html, figure, section, table, tag
from adaptlab.report.records import Run
from adaptlab.report.spread import spread_text
from adaptlab.report.view import StudyView
from adaptlab.tasks.preference import (
    CHOSEN_LOGPS,
    REJECTED_LOGPS,
    REWARD_ACCURACY,
    REWARD_MARGIN,
    PreferenceTask,
)

COLUMNS = {
    REWARD_ACCURACY: "reward accuracy",
    REWARD_MARGIN: "reward margin",
    CHOSEN_LOGPS: "chosen log-prob",
    REJECTED_LOGPS: "rejected log-prob",
}
"""The test scores shown per method, with their headers."""
CURVES = (REWARD_ACCURACY, REWARD_MARGIN)

LEAD = (
    "Reward accuracy is the share of test pairs whose chosen answer the tuned model rewards "
    "above the rejected one (its implicit reward: beta times the log-ratio to the reference "
    "for DPO, beta times the mean log-probability per token for SimPO and ORPO); the margin is "
    "the mean difference of the two rewards (for KTO, between the desirable and undesirable "
    "answers); the log-probabilities are the answers' summed over their tokens. Mean ± spread "
    "over seeds at each method's chosen learning rate; below, the same on dev after each epoch."
)


def preference(view: StudyView) -> Html:
    """The section, or nothing when the study has no setting of a preference task."""
    colors = plots.palette(view.methods)
    parts: list[Html] = []
    for setting in view.settings_of(PreferenceTask):
        chosen = view.chosen_runs(setting)
        label = setting.label(view.with_model)
        shown = [key for key in COLUMNS if any(key in r.test for rs in chosen.values() for r in rs)]
        rows = [
            [method, *(spread_text([r.test.get(key, float("nan")) for r in runs]) for key in shown)]
            for method, runs in chosen.items()
        ]
        parts += [tag("h3", label), table(["method", *(COLUMNS[k] for k in shown)], rows)]
        parts += _curves(chosen, colors, label)
    if not parts:
        return Html("")
    lead = tag("p", LEAD, class_="lead")
    return section("preference", "Preference tuning: reward accuracy and margins", lead, *parts)


def _curves(
    chosen: Mapping[str, Sequence[Run]], colors: dict[str, plots.Color], label: str
) -> list[Html]:
    """The dev reward accuracy and margin figures of a setting (those some run recorded)."""
    figures = []
    for metric in CURVES:
        curves = method_curves(chosen, metric)
        if curves:
            uri = plots.epoch_curves(curves, metric, colors, label)
            figures.append(figure(uri, f"dev {COLUMNS[metric]} against epochs, {label}"))
    return figures

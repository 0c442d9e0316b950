"""The report's AdapterFusion section: how much each fusion attends to each adapter.

As in Pfeiffer et al. 2021 (the AdapterFusion activation figure on the slides): the softmax
weight of each adapter, averaged over all tokens of the dev set, per layer; a table of the
layers' mean with its spread over seeds, and a heat map layer by adapter.
"""

from __future__ import annotations

import adaptlab.report.plots as plots
from adaptlab.report.aggregate import runs_of
from adaptlab.report.markup import Html, figure, section, table, tag
from adaptlab.report.spread import finite, mean, spread_text
from adaptlab.report.view import StudyView

LEAD = (
    "Each fusion's softmax weight per adapter, averaged over every token of the dev set "
    "(Pfeiffer et al. 2021): a high weight means the fusion draws on that adapter. Means over "
    "layers, then over seeds (± std over seeds), at the fusion's chosen learning rate."
)


def fusion(view: StudyView) -> Html:
    """Absent unless the study trained a fusion."""
    parts = [tag("p", LEAD, class_="lead")]
    for setting in view.settings:
        label = setting.label(view.with_model)
        for method, layers in view.fusion_weights(setting).items():
            cell = next(c for c in view.chosen_in(setting) if c.method == method)
            per_seed = [dict(r.fusion) for r in runs_of(view.runs, cell) if r.fusion]
            rows = []
            for adapter in sorted(layers, key=lambda name: -sum(finite(layers[name]))):
                seeds = [mean(run[adapter]) for run in per_seed if adapter in run]
                rows.append([adapter, spread_text(seeds)])
            parts += [
                tag("h3", f"{method} · {label}"),
                table(["adapter", "mean weight"], rows),
                figure(
                    plots.fusion_weights(layers, f"{method}, {label}"),
                    f"fusion weights of {method} per layer",
                ),
            ]
    if len(parts) == 1:
        return Html("")
    return section("fusion", "AdapterFusion: which adapters the fusion uses", *parts)

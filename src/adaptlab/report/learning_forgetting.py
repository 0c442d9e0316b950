"""The report's section on what adaptation learnt and forgot (a study's `forgetting:`, with
`analysis: [spectrum]` where asked): per setting, learning against forgetting on each source
probe, a point per method and learning rate (mean over seeds, ± std as error bars), the
frontier of the points no other beats on both; a table of the figures; the effective rank of
each method's weight updates per block (Biderman et al. 2024; Shuttleworth et al. 2024's
intruder dimensions in the table)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import adaptlab.report.plots_forgetting as plots_forgetting
from adaptlab.report.adaptation_records import ProbeForgetting
from adaptlab.report.markup import Html, figure, section, table, tag
from adaptlab.report.plots import palette
from adaptlab.report.records import Run, RunGroup
from adaptlab.report.spread import mean, mean_std, spread_text
from adaptlab.report.view import StudyView

LEAD = (
    "Each trained model and its base (adaptation switched off) scored with the same code. "
    "Learnt: the drop in mean negative log-likelihood per token (nats) on the run's own test "
    "split. Forgetting on each source probe, positive when the adapted model does worse: the "
    "rise in NLL per token on held-out text, the share of the facts the base answered that it "
    "no longer answers, the drop in accuracy on a multiple-choice task. A point per method and "
    "learning rate, mean ± std over seeds; the dashed line joins the points no other point "
    "beats on both learning more and forgetting less (the frontier)."
)
SPECTRUM = (
    "Effective rank of each weight update ΔW (the singular values holding 90% of its squared "
    "spectrum), averaged over the matrices of each block and over seeds; methods that insert "
    "modules instead of changing a matrix have none. Intruders: top-10 singular vectors of "
    "W + ΔW whose cosine with every singular vector of W stays below 0.5, summed over matrices."
)


def learning_forgetting(view: StudyView) -> Html:
    """The section, or nothing when no run measured its forgetting."""
    if not any(run.forgetting is not None for run in view.runs):
        return Html("")
    colors = palette(view.methods)
    parts = [tag("p", LEAD, class_="lead")]
    for setting in view.settings:
        arms = _arms(view, [r for r in view.runs if r.setting == setting])
        if not arms:
            continue
        label = setting.label(view.with_model)
        probes = list(dict.fromkeys(p.probe for a in arms for r in a.runs for p in _probes(r)))
        points = {
            probe: [p for arm in arms if (p := _point(arm, probe)) is not None] for probe in probes
        }
        uri = plots_forgetting.frontier(points, colors, label)
        parts += [figure(uri, f"learning against forgetting, {label}"), _table(arms, probes)]
        curves = {a.label: ranks for a in arms if (ranks := _mean_ranks(a.runs)) is not None}
        if curves:
            parts.append(tag("p", SPECTRUM, class_="lead"))
            by_label = {a.label: colors[a.method] for a in arms}
            uri = plots_forgetting.ranks(curves, by_label, label)
            parts.append(figure(uri, f"effective rank of the weight updates per block, {label}"))
    return section("forgetting", "Learning and forgetting", *parts)


def _arms(view: StudyView, runs: Sequence[Run]) -> list[RunGroup]:
    """The runs that measured forgetting, by method and learning rate (the rate in the label
    only where a method has several)."""
    measured = [r for r in runs if r.forgetting is not None]
    keys = list(dict.fromkeys((r.method, r.learning_rate) for r in measured))
    rates = {m: sum(1 for k in keys if k[0] == m) for m, _ in keys}
    return [
        RunGroup(
            method if rates[method] == 1 else f"{method} @ {rate:g}",
            method,
            tuple(r for r in measured if (r.method, r.learning_rate) == (method, rate)),
        )
        for method, rate in keys
    ]


def _probes(run: Run) -> Sequence[ProbeForgetting]:
    return run.forgetting.probes if run.forgetting is not None else ()


def _point(arm: RunGroup, probe: str) -> plots_forgetting.Point | None:
    """The arm's mean ± std learnt and forgetting on `probe` over its seeds."""
    pairs = [
        (r.forgetting.learnt, p.forgetting)
        for r in arm.runs
        if r.forgetting is not None
        for p in r.forgetting.probes
        if p.probe == probe
    ]
    if not pairs:
        return None
    x, x_std = mean_std(a for a, _ in pairs)
    y, y_std = mean_std(b for _, b in pairs)
    return plots_forgetting.Point(arm.label, arm.method, x, x_std, y, y_std)


def _table(arms: Sequence[RunGroup], probes: Sequence[str]) -> Html:
    """A row per arm: seeds, learnt, forgetting per probe, the update's rank and intruders."""
    rows = []
    for arm in arms:
        learnt = [r.forgetting.learnt for r in arm.runs if r.forgetting is not None]
        lost = [
            spread_text([p.forgetting for r in arm.runs for p in _probes(r) if p.probe == probe],
                        signed=True)
            for probe in probes
        ]  # fmt: skip
        rows.append([arm.label, len(arm.runs), spread_text(learnt, signed=True), *lost,
                     *_spectrum_cells(arm.runs)])  # fmt: skip
    headers = ["method", "seeds", "learnt (nats/token)", *probes, "ΔW rank (90%)", "intruders"]
    return table(headers, rows)


def _spectrum_cells(runs: Sequence[Run]) -> tuple[str, str]:
    """The mean effective rank and intruder count of the runs' updates ("no ΔW" for a method
    that changes no matrix, "–" where not measured)."""
    spectra = [r.spectrum for r in runs if r.spectrum is not None]
    if not spectra:
        return "–", "–"
    rank = mean(s.mean_rank for s in spectra)
    if math.isnan(rank):
        return "no ΔW", "–"
    return f"{rank:.1f}", f"{mean(s.intruders for s in spectra):.1f}"


def _mean_ranks(runs: Sequence[Run]) -> list[tuple[int, float]] | None:
    """The mean effective rank per block over the runs' spectra; None where none changed a
    matrix."""
    spectra = [r.spectrum for r in runs if r.spectrum is not None and r.spectrum.ranks]
    if not spectra:
        return None
    blocks = sorted({block for s in spectra for block, _ in s.ranks})
    return [
        (block, mean(rank for s in spectra for b, rank in s.ranks if b == block))
        for block in blocks
    ]

"""The report's section on using several tasks' adapters: single-task adapters against their
combinations without training, AdapterFusion across the data sets and multi-task training.

Pfeiffer et al. 2021 (AdapterFusion: abstract, and §5 with Table 1, the slides' "Results")
report that a fusion over single-task adapters outperforms multi-task training and matches
or beats the single-task adapters, most on small data sets. Per setting (data set × training
size), the metric judging it (a classification metric, or a generative one: exact match,
ROUGE-L, perplexity, ...), each approach's mean test score ± std over seeds at its chosen
learning rate, the best marked; then a verdict computed from those numbers: which approach
wins where, how far the combinations, the fusion and multi-task training are from the
single-task adapters, and what that says of the claim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import adaptlab.report.formatting as fmt
from adaptlab.report.aggregate import Cell, oriented
from adaptlab.report.markup import Html, section, table, tag
from adaptlab.report.records import (
    COMBINATION,
    FUSION,
    MULTI_TASK,
    SINGLE_TASK,
    Run,
    Setting,
)
from adaptlab.report.spread import finite
from adaptlab.report.view import StudyView
from adaptlab.tasks.judging import beats, scores_tie

CLAIM = (
    "Pfeiffer et al. (2021, abstract; §5, Table 1) report that AdapterFusion over single-task "
    "adapters outperforms multi-task training and matches or beats the single-task adapters "
    "themselves, most on small data sets."
)
LEAD = (
    "Each data set's single-task adapter against three ways to use every data set's adapter "
    "on it: combined without training (each classification data set scored with its own head; "
    "language models share theirs), AdapterFusion over them trained on the data set, and one "
    "adapter trained on every data set together (multi-task; a classification data set scored "
    "with its own labels competing). Mean ± std over seeds of the test score in each data "
    "set's judging metric (named in each row), each approach at its chosen learning rate; ★ "
    "marks the best of each row (each of a tie). Gaps are in that metric, averaged over the rows."
)


@dataclass(frozen=True)
class Approaches:
    """The methods of a study by approach, each in the study's order: `single` the single-task
    methods the others build on, then the combinations, the across-data fusions and the
    multi-task methods."""

    single: tuple[str, ...]
    combined: tuple[str, ...]
    fused: tuple[str, ...]
    multi_task: tuple[str, ...]
    settings: tuple[Setting, ...]
    """The settings (data set × size) the combinations, fusions and multi-task runs scored."""

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.single, *self.combined, *self.fused, *self.multi_task)


def combining(view: StudyView) -> Html:
    """Absent unless the study combined adapters, fused across data sets or trained
    multi-task."""
    found = approaches(view)
    if found is None:
        return Html("")
    rows = found.settings
    body = [
        [setting.label(view.with_model), view.judged[setting.data].metric]
        + _row(view, setting, found.columns)
        for setting in rows
    ]
    return section(
        "combining",
        "Combining adapters, AdapterFusion and multi-task training",
        tag("p", LEAD, class_="lead"),
        tag("div", table(["setting", "metric", *found.columns], body), class_="wide"),
        tag("p", verdict(view, found, rows)),
    )


def approaches(view: StudyView) -> Approaches | None:
    """The study's methods by approach; None without a combination, an across-data fusion or
    a multi-task method."""
    by_id = {run.run_id: run for run in view.runs}

    def methods(keep: Sequence[Run]) -> tuple[str, ...]:
        chosen = {run.method for run in keep}
        return tuple(m for m in view.methods if m in chosen)

    combined = [r for r in view.runs if r.approach == COMBINATION]
    fused = [r for r in view.runs if r.approach == FUSION and _across(r, by_id)]
    scored = [r for r in view.runs if r.approach == MULTI_TASK]
    if not (combined or fused or scored):
        return None
    spanning = {r.setting for r in [*combined, *fused, *scored]}
    built_on = [by_id[i] for r in [*combined, *fused] for i in r.builds_on if i in by_id]
    single = methods([r for r in built_on if r.approach == SINGLE_TASK])
    if not single:  # multi-task alone: every single-task method beside it
        single = methods(
            [r for r in view.runs if r.approach == SINGLE_TASK and r.setting in spanning]
        )
    settings = tuple(s for s in view.settings if s in spanning)
    return Approaches(single, methods(combined), methods(fused), methods(scored), settings)


def _across(run: Run, by_id: dict[str, Run]) -> bool:
    """Whether a fusion fuses adapters trained on more than one data set."""
    return len({by_id[i].setting.data for i in run.builds_on if i in by_id}) > 1


def _cell(view: StudyView, setting: Setting, method: str) -> Cell | None:
    """`method`'s cell in `setting` at its chosen learning rate, if it has a score."""
    return next((c for c in view.chosen_in(setting) if c.method == method and c.n), None)


def _leaders(view: StudyView, setting: Setting, methods: Sequence[str]) -> list[Cell]:
    """The cells of `methods` with the best mean test score in `setting`: one, or several
    that tie on it (`scores_tie`), in the order of `methods`."""
    cells = [c for m in methods if (c := _cell(view, setting, m)) is not None]
    best = max((oriented(c.metric, c.mean) for c in cells), default=math.nan)
    return [c for c in cells if scores_tie(oriented(c.metric, c.mean), best)]


def _best(view: StudyView, setting: Setting, methods: Sequence[str]) -> Cell | None:
    """A cell of `methods` with the best mean test score in `setting` (the first of a tie)."""
    return next(iter(_leaders(view, setting, methods)), None)


def _row(view: StudyView, setting: Setting, methods: Sequence[str]) -> list[str]:
    """Mean ± std of each of `methods` in `setting`, the best starred (each of a tie); a dash
    without one."""
    leaders = {c.method for c in _leaders(view, setting, methods)}
    shown = []
    for method in methods:
        cell = _cell(view, setting, method)
        text = "–" if cell is None else fmt.score_pm(cell.mean, cell.std)
        shown.append(("★\u00a0" if method in leaders else "") + text)
    return shown


Pair = tuple[Cell, Cell]
"""Two approaches' cells of one row."""


def _pairs(
    view: StudyView, rows: Sequence[Setting], method: str, others: Sequence[str]
) -> list[Pair]:
    """Per row where both have a score: `method`'s cell and the best cell of `others`."""
    pairs = []
    for setting in rows:
        cell, best = _cell(view, setting, method), _best(view, setting, others)
        if cell is not None and best is not None:
            pairs.append((cell, best))
    return pairs


def _gap(pairs: Sequence[Pair]) -> float:
    """Mean of how much better the first cell of each pair scores (negative: worse)."""
    return sum(oriented(a.metric, a.mean - b.mean) for a, b in pairs) / len(pairs)


def _wins_of(pairs: Sequence[Pair]) -> int:
    """The pairs whose first cell scores better (a tie is no win)."""
    return sum(beats(oriented(a.metric, a.mean), oriented(b.metric, b.mean)) for a, b in pairs)


def _spread(pairs: Sequence[Pair]) -> float:
    """Mean over the pairs of the larger std over seeds of the two cells."""
    stds = [max(finite([a.std, b.std]), default=0.0) for a, b in pairs]
    return sum(stds) / len(stds)


def _signed(value: float) -> str:
    return f"{value:+.3f}".replace("-", "−")


def _of(pairs: Sequence[Pair], rows: Sequence[Setting]) -> str:
    """How many of the rows a comparison covers, when not all."""
    return "" if len(pairs) == len(rows) else f" ({len(pairs)} of {len(rows)} data sets)"


def verdict(view: StudyView, found: Approaches, rows: Sequence[Setting]) -> str:
    """The verdict in a paragraph, every number computed from the table."""
    sentences = [_wins(view, found, rows)]
    if found.single:
        base = found.single[0]
        gaps = []
        for method in (m for m in found.columns if m not in found.single):
            pairs = _pairs(view, rows, method, [base])
            if pairs:
                gaps.append(f"{method} {_signed(_gap(pairs))}{_of(pairs, rows)}")
        if gaps:
            sentences.append(
                f"Mean gap to the single-task adapters ({base}) over the data sets: "
                f"{', '.join(gaps)}."
            )
    for fusion in found.fused:
        sentences += _fusion(view, found, rows, fusion)
    if not found.fused:
        sentences.append(CLAIM + " No AdapterFusion across the data sets ran here to test it.")
    return " ".join(sentences)


def _wins(view: StudyView, found: Approaches, rows: Sequence[Setting]) -> str:
    """Which approach is best on which rows (those that tie named together)."""
    winners: dict[str, list[str]] = {}
    for setting in rows:
        leaders = [c.method for c in _leaders(view, setting, found.columns)]
        if leaders:
            named = fmt.names(leaders) + (", tied," if len(leaders) > 1 else "")
            winners.setdefault(named, []).append(setting.label(view.with_model))
    parts = [f"{m} on {len(w)} of {len(rows)} ({', '.join(w)})" for m, w in winners.items()]
    return "Best: " + "; ".join(parts) + "." if parts else "No approach has a score."


def _fusion(view: StudyView, found: Approaches, rows: Sequence[Setting], fusion: str) -> list[str]:
    """How `fusion` fares against the combinations, the single-task adapters and multi-task
    training, and what that says of the claim."""
    sentences, verdicts = [], []
    combined = _pairs(view, rows, fusion, found.combined) if found.combined else []
    if combined:
        sentences.append(
            f"{fusion} beats the best combination on {_wins_of(combined)} of {len(combined)} "
            f"data sets, by {_signed(_gap(combined))} on average."
        )
    single = _pairs(view, rows, fusion, found.single[:1]) if found.single else []
    if single:
        gap, spread = _gap(single), _spread(single)
        place = "within" if abs(gap) <= spread else "beyond"
        sentences.append(
            f"Against {found.single[0]} it is {_signed(gap)}{_of(single, rows)}, {place} the "
            f"spread over seeds ({spread:.3f})."
        )
        verdicts.append(gap >= -spread)  # matches or beats
    for multi in found.multi_task:
        pairs = _pairs(view, rows, fusion, [multi])
        if pairs:
            sentences.append(
                f"Against {multi} it wins on {_wins_of(pairs)} of {len(pairs)} data sets, "
                f"{_signed(_gap(pairs))} on average."
            )
            verdicts.append(_gap(pairs) > 0)
    if verdicts:
        held = "holds" if all(verdicts) else "holds in part" if any(verdicts) else "does not hold"
        sentences.append(f"{CLAIM} Here the claim {held} at this scale.")
    return sentences

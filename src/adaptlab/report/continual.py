"""The report's continual-learning section: per strategy of a sequence study, the score
matrix R (mean over seeds) as a heat map, and a table of its scores with their spread.

R[i][j] is the accuracy on stage j's test set after training stage i (the held-out perplexity
of corpus j, for a causal-LM sequence). The scores are those of
`adaptlab.continual.metrics` (docs/continual.md): average (GEM's ACC), backward
transfer (GEM's BWT), forward transfer against each stage trained alone (when the study asked
for `single_stage: true`) and the average forgetting (Chaudhry et al. 2018), each a mean over
seeds ± the standard deviation over seeds. A seed whose matrix or single-stage scores hold a NaN
or infinite value (it diverged) is counted but left out of the means.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import adaptlab.report.formatting as fmt
import adaptlab.report.plots as plots
from adaptlab.continual.objectives import get_objective
from adaptlab.continual.result import SequenceResult
from adaptlab.report.markup import Html, figure, join, note, section, table, tag
from adaptlab.report.spread import DIVERGED, finite, mean, spread_text
from adaptlab.study.store_rows import StoredSequence

LEAD = (
    "Each strategy's score matrix, mean over seeds: row i is the model after training stage i, "
    "column j its score on stage j's test set (accuracy; held-out perplexity for a causal-LM "
    "sequence, lower is better). For classification, cells above the diagonal test a head not "
    "trained yet (chance level). Below: the average score after the last stage, backward "
    "transfer (BWT, negative = forgetting), forward transfer against each stage trained alone "
    "(FWT) and the average forgetting (positive = lost), each mean ± std over seeds, in the "
    "metric's units (docs/continual.md)."
)


@dataclass(frozen=True)
class Arm:
    """One method and strategy in one setting (model, stages, size, learning rate), its seeds."""

    setting: str
    label: str
    stages: tuple[str, ...]
    results: tuple[SequenceResult, ...]

    @property
    def metric(self) -> str:
        return self.results[0].metric

    @property
    def kept(self) -> tuple[SequenceResult, ...]:
        """The seeds whose numbers are all finite: those the means are over."""
        return tuple(r for r in self.results if not _diverged(r))

    def seeds_cell(self) -> str:
        """How many seeds, and how many of them diverged."""
        seeds, left = len(self.results), len(self.results) - len(self.kept)
        return f"{seeds - left} of {seeds} ({left} {DIVERGED})" if left else str(seeds)

    def mean_matrix(self) -> list[list[float]]:
        """R averaged cell by cell over the kept seeds."""
        size = len(self.stages)
        return [[mean(r.matrix[i][j] for r in self.kept) for j in range(size)] for i in range(size)]

    def score_cells(self) -> list[str]:
        """Average, BWT, FWT and average forgetting, as `mean ± std` over the kept seeds;
        `diverged` when every seed diverged."""
        if not self.kept:
            return [DIVERGED] * 4
        scores = [result.scores for result in self.kept]
        return [
            _spread([s.average for s in scores], signed=False),
            _spread([s.backward_transfer for s in scores]),
            _spread([s.forward_transfer for s in scores]),
            _spread([s.average_forgetting for s in scores]),
        ]


def arms(sequences: Sequence[StoredSequence]) -> list[Arm]:
    """The sequences grouped by setting, method and strategy (seeds together), in plan order."""
    groups: dict[tuple[str, str], list[SequenceResult]] = {}
    stages: dict[tuple[str, str], tuple[str, ...]] = {}
    for stored in sequences:
        result = stored.result
        key = (_setting(result), f"{stored.method_label} · {stored.strategy_label}")
        groups.setdefault(key, []).append(result)
        stages.setdefault(key, tuple(stage.name for stage in result.stages))
    return [
        Arm(setting, label, stages[(setting, label)], tuple(results))
        for (setting, label), results in groups.items()
    ]


def continual(sequences: Sequence[StoredSequence]) -> Html:
    """Absent unless the store holds finished sequences."""
    found = arms(sequences)
    if not found:
        return Html("")
    parts = [tag("p", LEAD, class_="lead")]
    for setting in dict.fromkeys(arm.setting for arm in found):
        mine = [arm for arm in found if arm.setting == setting]
        rows = [[arm.label, arm.seeds_cell(), *arm.score_cells()] for arm in mine]
        metric = fmt.metric(mine[0].metric)
        parts += [
            tag("h3", setting),
            table(
                ["method · strategy", "seeds", f"average {metric}", "BWT", "FWT", "forgetting"],
                rows,
            ),
        ]
        parts += [_matrix(arm) for arm in mine]
    return section("continual", "Continual learning: what each strategy kept", *parts)


def _matrix(arm: Arm) -> Html:
    """The arm's mean matrix as a heat map; a note when every seed diverged."""
    seeds = len(arm.kept)
    if not seeds:
        return note(f"{arm.label}: every seed {DIVERGED} (NaN or infinite scores); no matrix.")
    return figure(
        plots.score_matrix(arm.mean_matrix(), arm.stages, arm.label, arm.metric),
        f"{arm.metric} matrix of {arm.label}",
        f"{arm.label}: {fmt.metric(arm.metric)} after each stage (rows) on each stage "
        f"(columns), mean of {seeds} seed{'s' if seeds > 1 else ''}",
    )


def _diverged(result: SequenceResult) -> bool:
    """Whether a score of the sequence's matrix or of its stages trained alone is NaN or
    infinite."""
    values = [v for row in result.matrix for v in row] + list(result.single_stage or ())
    return not all(math.isfinite(v) for v in values)


def footer(sequences: Sequence[StoredSequence], title: str) -> Html:
    """Study names, sequence count and versions, for a report of sequences only."""
    results = [stored.result for stored in sequences]
    seconds = finite(r.wall_seconds for r in results)
    facts = [
        ("report", title),
        ("study", ", ".join(dict.fromkeys(stored.study for stored in sequences))),
        ("sequences", f"{len(results)} ({fmt.seconds(sum(seconds)) if seconds else 'n/a'})"),
        ("models", ", ".join(dict.fromkeys(r.spec.model for r in results))),
        (
            "versions",
            "; ".join(
                dict.fromkeys(
                    f"adaptlab {r.versions.adaptlab}, torch {r.versions.torch}, "
                    f"transformers {r.versions.transformers}"
                    for r in results
                )
            ),
        ),
    ]
    rows = join(join([tag("dt", k), tag("dd", v)]) for k, v in facts)
    return tag("footer", tag("dl", rows))


def _setting(result: SequenceResult) -> str:
    spec = result.spec
    size = "all" if spec.train_size is None else f"{spec.train_size:,}"
    stages = " → ".join(stage.name for stage in result.stages)
    unit = get_objective(spec.objective).unit
    return (
        f"{Path(spec.model).name} · {stages} · {size} {unit} per stage · "
        f"lr {fmt.rate(spec.learning_rate())}"
    )


def _spread(values: Sequence[float | None], signed: bool = True) -> str:
    """`mean ± std` over seeds (signed scores with their sign); – when a seed has none."""
    if not values or any(value is None for value in values):
        return "–"
    return spread_text([value for value in values if value is not None], signed)

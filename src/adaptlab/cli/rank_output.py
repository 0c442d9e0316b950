"""What `adaptlab rank` prints: the score tables (best of each column in bold), the time
taken, the order by each estimator and, with a study, the agreement with its fine-tuning."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table
from rich.text import Text

from adaptlab.cli.console import console
from adaptlab.select.rank_and_validate import VALIDATED, RankReport, RankRequest
from adaptlab.select.ranking import Ranking, RankRow
from adaptlab.select.validate import Validation
from adaptlab.tasks.judging import scores_tie

_console = console()


def print_report(report: RankReport, request: RankRequest, store: Path | None) -> None:
    """The score tables, the time taken, the order by each estimator and the agreement."""
    ranking, how = report.ranking, request.how
    if report.diverged:
        _console.print(
            f"left out {report.diverged} run{'s' if report.diverged > 1 else ''} of {store} "
            "whose test score is NaN or infinite (diverged)",
            highlight=False,
        )
    if ranking.dropped is not None:
        _console.print(ranking.dropped.describe(ranking.examples), highlight=False)
    title = f"{ranking.data}: scores ({how} layer{'s' if how == 'mean' else ''})"
    _print_scores(ranking, ranking.rows, title, show_layer=how == "best")
    if request.per_layer:
        _print_scores(ranking, ranking.layer_rows, f"{ranking.data}: scores per layer")
    _console.print(
        f"{len(request.candidates)} candidates, {ranking.examples} examples: "
        f"{report.seconds:.1f} s "
        f"(features {ranking.extract_seconds:.1f} s, {ranking.cache_hits} from cache; "
        f"scoring {ranking.score_seconds:.1f} s)"
    )
    for name in ranking.estimators:
        tiers = ranking.tiers(name)
        _console.print(f"ranking by {name}: " + " > ".join(" = ".join(t) for t in tiers))
    for kind, validation in report.validations.items():
        _print_agreement(ranking.data, validation, VALIDATED[kind])
    if report.validations:
        _console.print(f"saved in {store}: `adaptlab study report` shows it")


def _print_scores(
    ranking: Ranking, rows: tuple[RankRow, ...], title: str, show_layer: bool = False
) -> None:
    """A table of score per candidate per estimator, best of each column in bold (each of a
    tie); with `show_layer`, the layer each score came from."""
    table = Table(title=title)
    table.add_column("candidate")
    for name in ranking.estimators:
        table.add_column(name, justify="right")
    best = {name: max(row.scores[name] for row in rows) for name in ranking.estimators}
    for row in rows:
        cells = []
        for name in ranking.estimators:
            text = f"{row.scores[name]:.4g}"
            if show_layer:
                text += f" (L{row.layers[name]})"
            top = scores_tie(row.scores[name], best[name])
            cells.append(Text(text, style="bold" if top else ""))
        table.add_row(row.name, *cells)
    _console.print(table)


def _print_agreement(data: str, validation: Validation, what: str) -> None:
    """Each estimator's agreement with the fine-tuned scores, as a table."""
    fine_tuned = ", ".join(validation.fine_tuned)
    table = Table(title=f"{data}: agreement with fine-tuning ({what}: {fine_tuned})")
    for column in ("estimator", "kendall tau", "weighted tau", "pearson", "n"):
        table.add_column(column, justify="left" if column == "estimator" else "right")
    for name, result in validation.agreements.items():
        table.add_row(
            name,
            *(_number(v) for v in (result.kendall_tau, result.weighted_tau, result.pearson)),
            str(result.candidates),
        )
    _console.print(table)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"

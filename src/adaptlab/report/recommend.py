"""The "what to use" verdict of one setting: the winner, its margin over the runner-up, and
whether that margin is larger than the noise over seeds (two-sided Welch's t-test, p < 0.05).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

import adaptlab.report.formatting as fmt
from adaptlab.continual.metrics import LOWER_IS_BETTER
from adaptlab.report.aggregate import Cell, oriented, ranked
from adaptlab.report.records import Setting

ALPHA = 0.05
TEST_NAME = "two-sided Welch's t-test"


@dataclass(frozen=True)
class Verdict:
    """Methods of one setting (each at its chosen learning rate), best mean test score first;
    the methods whose every run diverged or failed apart."""

    setting: Setting
    ranking: tuple[Cell, ...]
    p_value: float | None  # winner vs runner-up; None when either has a single seed
    tied: tuple[Cell, ...]  # the winner and every method not clearly worse than it
    unscored: tuple[Cell, ...] = ()  # no run with a finite test score

    @property
    def winner(self) -> Cell | None:
        """The best method; None when no method has a score."""
        return self.ranking[0] if self.ranking else None

    @property
    def runner_up(self) -> Cell | None:
        return self.ranking[1] if len(self.ranking) > 1 else None

    @property
    def gap(self) -> float | None:
        """How much better the winner's mean is than the runner-up's (never negative: lower
        where lower is better)."""
        if self.winner is None or self.runner_up is None:
            return None
        return oriented(self.winner.metric, self.winner.mean - self.runner_up.mean)

    @property
    def clear(self) -> bool | None:
        """True when the gap to the runner-up is significant; None when it cannot be tested."""
        return None if self.p_value is None else self.p_value < ALPHA

    @property
    def cheapest_tied(self) -> Cell | None:
        """The method with the fewest trainable parameters among those tied with the winner."""
        return min(self.tied, key=lambda c: c.trainable, default=None)


def welch_p(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sided Welch's t-test p-value; None with fewer than two values on either side."""
    if len(a) < 2 or len(b) < 2:
        return None
    if math.isclose(sum(a) / len(a), sum(b) / len(b), rel_tol=0.0, abs_tol=1e-12):
        return 1.0
    if max(a) == min(a) and max(b) == min(b):
        return 0.0  # no spread at all on either side and different means
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = stats.ttest_ind(a, b, equal_var=False)
    return float(result.pvalue)


def verdict(cells: Sequence[Cell]) -> Verdict:
    """The verdict over the chosen cells of one setting (one cell per method)."""
    ranking = tuple(ranked(cells))
    unscored = tuple(c for c in cells if not c.n)
    if not ranking:
        return Verdict(cells[0].setting, (), None, (), unscored)
    winner = ranking[0]
    tied = tuple(c for c in ranking if c is winner or not _clearly_worse(winner, c))
    p = welch_p(winner.scores, ranking[1].scores) if len(ranking) > 1 else None
    return Verdict(winner.setting, ranking, p, tied, unscored)


def _clearly_worse(winner: Cell, other: Cell) -> bool:
    p = welch_p(winner.scores, other.scores)
    return p is not None and p < ALPHA


def sentence(v: Verdict, with_model: bool) -> str:
    """The verdict as one plain-text paragraph (escape it before putting it in HTML); methods
    whose every run diverged or failed are named at its end."""
    failed = "; ".join(f"{c.method} ({c.left_out_text()})" for c in v.unscored)
    head = f"{v.setting.label(with_model)}: "
    if v.winner is None:
        return head + f"no method has a finite test score ({failed}); nothing to recommend."
    return head + _comparison(v, v.winner) + (f" Left out: {failed}." if failed else "")


def _comparison(v: Verdict, w: Cell) -> str:
    """The winner `w` against the runner-up, and whether the gap is noise."""
    r = v.runner_up
    if r is None:
        alone = "has a score" if v.unscored else "was run"
        return f"only {w.method} {alone} ({_stats(w)}); nothing to compare it with."
    side = "below" if w.metric in LOWER_IS_BETTER else "above"
    text = (
        f"{w.method} wins with {fmt.metric(w.metric)} {_stats(w)}, "
        f"{fmt.score(v.gap or 0.0)} {side} the runner-up {r.method} ({_stats(r)}); "
    )
    if v.p_value is None:
        return text + "with a single seed there is no spread over seeds to weigh the gap against."
    test = f"{TEST_NAME} {fmt.p_value(v.p_value)}"
    if v.clear:
        return text + f"the gap is larger than the spread over seeds ({test})."
    text += f"the gap is within the spread over seeds ({test})"
    cheap = v.cheapest_tied
    if cheap is None or cheap is w:
        return text + f", and {w.method} also trains the fewest parameters of the tied methods."
    return text + (
        f", so {cheap.method}, the cheapest method not clearly worse than the winner "
        f"({fmt.percent(cheap.trainable_pct)} of parameters trained), is as good a choice."
    )


def _stats(cell: Cell) -> str:
    seeds = "1 seed" if cell.n == 1 else f"{cell.n} seeds"
    left = f" ({cell.left_out_text()}, left out)" if cell.left_out else ""
    return f"{fmt.score_pm(cell.mean, cell.std)}, lr {fmt.rate(cell.learning_rate)}, {seeds}{left}"

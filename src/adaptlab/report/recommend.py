"""The "what to use" verdict of one setting: the winner, its margin over the runner-up, and
whether that margin is larger than the noise over seeds (two-sided Welch's t-test, p < 0.05).

Methods whose mean test scores tie (`adaptlab.tasks.judging.scores_tie`: equal up to float
noise) lead together: the verdict says they tie and which trains the fewest parameters, and
no method wins alone.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

import adaptlab.report.formatting as fmt
from adaptlab.continual.metrics import LOWER_IS_BETTER
from adaptlab.report.aggregate import Cell, oriented, ranked, scored
from adaptlab.report.records import Setting
from adaptlab.tasks.judging import scores_tie

ALPHA = 0.05
TEST_NAME = "two-sided Welch's t-test"


@dataclass(frozen=True)
class Verdict:
    """Methods of one setting (each at its chosen learning rate), best mean test score first
    (those tied on it in the study's order); the methods whose every run diverged or failed
    apart."""

    setting: Setting
    ranking: tuple[Cell, ...]
    leaders: tuple[Cell, ...]  # the best mean test score: one method, or several that tie
    p_value: float | None  # first leader vs runner-up; None when either has a single seed
    within_noise: tuple[Cell, ...]  # the leaders and every method not clearly worse than them
    unscored: tuple[Cell, ...] = ()  # no run with a finite test score

    @property
    def winner(self) -> Cell | None:
        """The best method alone; None when no method has a score or several tie."""
        return self.leaders[0] if len(self.leaders) == 1 else None

    @property
    def runner_up(self) -> Cell | None:
        """The best method below the leaders."""
        return self.ranking[len(self.leaders)] if len(self.ranking) > len(self.leaders) else None

    @property
    def gap(self) -> float | None:
        """How much better the leaders' mean is than the runner-up's (never negative: lower
        where lower is better)."""
        if not self.leaders or self.runner_up is None:
            return None
        lead = self.leaders[0]
        return oriented(lead.metric, lead.mean - self.runner_up.mean)

    @property
    def clear(self) -> bool | None:
        """True when the gap to the runner-up is significant; None when it cannot be tested."""
        return None if self.p_value is None else self.p_value < ALPHA

    @property
    def cheapest_within_noise(self) -> Cell | None:
        """The method with the fewest trainable parameters among those within the noise of the
        leaders."""
        return min(self.within_noise, key=lambda c: c.trainable, default=None)


def welch_p(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sided Welch's t-test p-value; None with fewer than two values on either side."""
    if len(a) < 2 or len(b) < 2:
        return None
    if scores_tie(sum(a) / len(a), sum(b) / len(b)):
        return 1.0
    if max(a) == min(a) and max(b) == min(b):
        return 0.0  # no spread at all on either side and different means
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = stats.ttest_ind(a, b, equal_var=False)
    return float(result.pvalue)


def verdict(cells: Sequence[Cell]) -> Verdict:
    """The verdict over the chosen cells of one setting (one cell per method, study order)."""
    unscored = tuple(c for c in cells if not c.n)
    found = scored(cells)
    if not found:
        return Verdict(cells[0].setting, (), (), None, (), unscored)
    best = ranked(found)[0].mean
    leaders = tuple(c for c in found if scores_tie(c.mean, best))
    rest = tuple(c for c in ranked(found) if not scores_tie(c.mean, best))
    first = leaders[0]
    p = welch_p(first.scores, rest[0].scores) if rest else None
    close = leaders + tuple(c for c in rest if not _clearly_worse(first, c))
    return Verdict(first.setting, leaders + rest, leaders, p, close, unscored)


def _clearly_worse(leader: Cell, other: Cell) -> bool:
    p = welch_p(leader.scores, other.scores)
    return p is not None and p < ALPHA


def sentence(v: Verdict, with_model: bool) -> str:
    """The verdict as one plain-text paragraph (escape it before putting it in HTML); methods
    whose every run diverged or failed are named at its end."""
    failed = "; ".join(f"{c.method} ({c.left_out_text()})" for c in v.unscored)
    head = f"{v.setting.label(with_model)}: "
    if not v.leaders:
        return head + f"no method has a finite test score ({failed}); nothing to recommend."
    return head + _comparison(v) + (f" Left out: {failed}." if failed else "")


def _comparison(v: Verdict) -> str:
    """The leaders against the runner-up, and whether the gap is noise."""
    r, lead = v.runner_up, v.leaders[0]
    if r is None and v.winner is not None:
        alone = "has a score" if v.unscored else "was run"
        return f"only {lead.method} {alone} ({_stats(lead)}); nothing to compare it with."
    text = _lead(v)
    if r is None:
        return text + "."
    side = "below" if lead.metric in LOWER_IS_BETTER else "above"
    subject = "" if v.winner else f"; {'both' if len(v.leaders) == 2 else 'all'} are"
    text += f"{subject} {fmt.score(v.gap or 0.0)} {side} the runner-up {r.method} ({_stats(r)}); "
    if v.p_value is None:
        return text + "with a single seed there is no spread over seeds to weigh the gap against."
    test = f"{TEST_NAME} {fmt.p_value(v.p_value)}"
    if v.clear:
        return text + f"the gap is larger than the spread over seeds ({test})."
    text += f"the gap is within the spread over seeds ({test})"
    cheap = v.cheapest_within_noise or lead
    if any(cheap is c for c in v.leaders):
        return text + f", and {cheap.method} trains the fewest parameters of the methods within it."
    return text + (
        f", so {cheap.method}, the cheapest method not clearly worse than the "
        f"{'winner' if v.winner else 'leaders'} ({fmt.percent(cheap.trainable_pct)} of "
        "parameters trained), is as good a choice."
    )


def _lead(v: Verdict) -> str:
    """`lora wins with exact match 0.500 ± ...,` or `lora and ia3 tie at exact match 0.433
    (each's numbers); ia3 trains 8x fewer parameters`."""
    if v.winner is not None:
        return f"{v.winner.method} wins with {fmt.metric(v.winner.metric)} {_stats(v.winner)},"
    lead = v.leaders[0]
    each = "; ".join(f"{c.method}: {_stats(c)}" for c in v.leaders)
    return (
        f"{fmt.names(c.method for c in v.leaders)} tie at {fmt.metric(lead.metric)} "
        f"{fmt.score(lead.mean)} ({each}); {_cheapest(v.leaders)}"
    )


def _cheapest(tied: Sequence[Cell]) -> str:
    """Which of the tied methods trains the fewest parameters: `ia3 trains 8x fewer
    parameters` (than the next cheapest, named when more than two tie)."""
    by_cost = sorted(tied, key=lambda c: c.trainable)
    low = by_cost[0].trainable
    fewest = [c.method for c in tied if c.trainable == low]
    if len(fewest) == len(tied):
        return f"each trains {fmt.count(low)} parameters"
    verb = "trains" if len(fewest) == 1 else "train"
    if low == 0:
        return f"{fmt.names(fewest)} {verb} no parameters"
    following = by_cost[len(fewest)]
    than = "" if len(tied) == 2 else f" than the next, {following.method}"
    return (
        f"{fmt.names(fewest)} {verb} {fmt.times(following.trainable / low)} fewer parameters{than}"
    )


def _stats(cell: Cell) -> str:
    seeds = "1 seed" if cell.n == 1 else f"{cell.n} seeds"
    left = f" ({cell.left_out_text()}, left out)" if cell.left_out else ""
    return f"{fmt.score_pm(cell.mean, cell.std)}, lr {fmt.rate(cell.learning_rate)}, {seeds}{left}"

"""Which metric judges the methods on each data set of a report, and the one shown beside it.

The study spec's `metric:` (or the report's `--metric`) when given; otherwise the default rule
of its task (`Task.choose_metric`) on the training samples of the data set's runs: its most skewed
sample decides (with stratified sampling every seed's sample has nearly the same classes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from adaptlab.errors import ConfigError
from adaptlab.report.records import Run
from adaptlab.tasks.choice import choose_metric
from adaptlab.tasks.judging import MetricChoice, class_spread, require_metric
from adaptlab.tasks.registry import get_task


@dataclass(frozen=True)
class Judgement:
    """The metric judging one data set's runs, why, and the metric shown beside it (None when
    some run lacks it)."""

    data: str
    task: str
    choice: MetricChoice
    second: str | None

    @property
    def metric(self) -> str:
        return self.choice.metric


def judge(runs: Sequence[Run], override: str | None = None) -> dict[str, Judgement]:
    """A judgement per data set name, in the runs' order; ConfigError when the metric asked
    for is not computed on a data set, or its studies ask for different metrics (a run with no
    test score at all failed, and is shown as such)."""
    names = list(dict.fromkeys(run.setting.data for run in runs))
    return {
        name: _judge(name, [r for r in runs if r.setting.data == name], override) for name in names
    }


def _judge(data: str, runs: Sequence[Run], override: str | None) -> Judgement:
    task = runs[0].task
    asked = sorted({r.study_metric for r in runs if r.study_metric is not None})
    if override is None and len(asked) > 1:
        raise ConfigError(
            f"the studies with runs on {data} ask for different metrics ({', '.join(asked)}); "
            "pick one with `adaptlab study report --metric`"
        )
    requested = override or (asked[0] if asked else None)
    by = "--metric" if override else "`metric:` in the study spec"
    choice = choose_metric(task, _most_skewed(runs), requested, by)
    for run in runs:
        if not run.test:
            continue  # a run with no test score at all failed: the report shows it as such
        try:
            require_metric(choice.metric, run.test, data, task)
        except ConfigError as error:
            raise ConfigError(f"result record {run.run_id}: {error}") from None
    second = get_task(task).second_metric(choice.metric)
    if any(second not in run.test for run in runs if choice.metric in run.test):
        return Judgement(data, task, choice, None)
    return Judgement(data, task, choice, second)


def _most_skewed(runs: Sequence[Run]) -> dict[str, int] | None:
    """The training class counts with the largest largest-to-smallest ratio, if any recorded."""
    counted = [dict(r.train_counts) for r in runs if r.train_counts is not None]
    spreads = [(class_spread(counts), counts) for counts in counted]
    ranked = [(spread.ratio, counts) for spread, counts in spreads if spread is not None]
    if not ranked:
        return counted[0] if counted else None
    return max(ranked, key=lambda pair: pair[0])[1]

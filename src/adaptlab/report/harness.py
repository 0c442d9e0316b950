"""The report's section on lm-evaluation-harness scores (a study's `harness:`): one table per
lm-eval task (or group), a row per approach (setting: data set, training size and, where the
study compares models, model; method, with its scale where the study varies it), each metric's
mean ± std over seeds at the method's chosen learning rate, and how many seeds it is over."""

from __future__ import annotations

from collections.abc import Sequence

import adaptlab.report.formatting as fmt
from adaptlab.records.harness import HarnessScores
from adaptlab.report.markup import Html, note, section, table, tag
from adaptlab.report.records import Run, RunGroup
from adaptlab.report.spread import spread_text
from adaptlab.report.view import StudyView

LEAD = (
    "Each trained model scored by EleutherAI's lm-evaluation-harness on the study's tasks "
    "(harness:), in memory after training: per task, each metric's mean ± std over seeds of "
    "each method at its chosen learning rate (the one its mean dev score chose). lm-eval's "
    "standard error of each score is kept in the run's record."
)


def harness(view: StudyView) -> Html:
    """The section, or nothing when no run was scored with lm-evaluation-harness."""
    rows = approaches(view)
    if not rows:
        return Html("")
    scored = [run.harness for row in rows for run in row.runs if run.harness is not None]
    tasks = list(dict.fromkeys(task for scores in scored for task in scores.scores))
    parts = [tag("p", LEAD, class_="lead")]
    for task in tasks:
        parts += [tag("h3", task), _table(task, rows)]
    settings = dict.fromkeys(_how(scores) for scores in scored)
    parts.append(note(f"Scored with {'; '.join(settings)}."))
    return section("harness", "lm-evaluation-harness", *parts)


def approaches(view: StudyView) -> list[RunGroup]:
    """Per setting and method (at its chosen learning rate), its runs with harness scores."""
    rows = []
    for setting in view.settings:
        for cell in view.chosen_in(setting):
            runs = tuple(
                run
                for run in view.runs
                if (run.setting, run.method, run.learning_rate)
                == (cell.setting, cell.method, cell.learning_rate)
                and run.harness is not None
            )
            if runs:
                rows.append(RunGroup(setting.label(view.with_model), cell.method, runs))
    return rows


def _table(task: str, rows: Sequence[RunGroup]) -> Html:
    """The table of `task`: a row per approach that scored it, a column per metric."""
    found = [
        (row, [s for r in row.runs if (s := _task_scores(r, task)) is not None]) for row in rows
    ]
    found = [(row, runs) for row, runs in found if runs]
    metrics = list(dict.fromkeys(m for _, runs in found for scores in runs for m in scores))
    body = [
        [
            row.label,
            row.method,
            len(runs),
            *(
                spread_text([scores[metric] for scores in runs if metric in scores])
                if any(metric in scores for scores in runs)
                else "–"
                for metric in metrics
            ),
        ]
        for row, runs in found
    ]
    headers = ["setting", "method", "seeds", *(fmt.metric(metric) for metric in metrics)]
    return tag("div", table(headers, body), class_="wide")


def _task_scores(run: Run, task: str) -> dict[str, float] | None:
    """The metrics `run` scored on `task`, if it scored it."""
    scores = run.harness.scores.get(task) if run.harness is not None else None
    return None if scores is None else dict(scores.metrics)


def _how(scores: HarnessScores) -> str:
    """The lm-eval version and options the scores were made with, in words."""
    shots = "each task's own shots" if scores.num_fewshot is None else f"{scores.num_fewshot}-shot"
    limit = "every example" if scores.limit is None else f"at most {scores.limit} examples a task"
    return f"lm-eval {scores.lm_eval_version}, {shots}, {limit}"

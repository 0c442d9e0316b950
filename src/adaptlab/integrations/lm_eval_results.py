"""lm-evaluation-harness results as lm-eval writes them (`lm_eval --output_path`): one
`results_<date>.json` per evaluation in lm-eval's own layout (results, configs, versions,
n-shot, ..., then the task hashes and the general config), written beside the run in
`lm_eval/` or where the user says, into a folder that is new or holds only such files; and
the scores of them a run's result keeps (`adaptlab.records.harness`)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from adaptlab.fileio import atomic_write
from adaptlab.finite import finite_json
from adaptlab.paths import Inputs, check_output_folder, check_own_folder, json_with_key
from adaptlab.records.harness import HarnessScores, TaskScores

RESULTS_NAME = re.compile(r"results_[0-9T.-]+\.json")
"""The name lm-eval gives a results file: `results_` and the time it was written."""
RESULTS_KEY = "n-shot"
"""A key of every lm-eval results file (how an earlier one is known)."""
WHAT = "the lm-eval results folder"


def check_results_folder(folder: Path, inputs: Inputs) -> None:
    """Fail, before any work, unless `folder` can take a results file: a folder (or one to be
    made) that can be written, apart from the command's `inputs`, holding nothing but earlier
    lm-eval results."""
    check_output_folder(folder, WHAT, inputs)
    check_own_folder(folder, WHAT, is_earlier_results)


def is_earlier_results(path: Path) -> bool:
    """Whether `path` is a results file written here before (lm-eval's name and layout)."""
    return bool(RESULTS_NAME.fullmatch(path.name)) and json_with_key(path, RESULTS_KEY)


def results_document(results: dict[str, Any], tracker: Any) -> dict[str, Any]:
    """What lm-eval writes for `results` (from `simple_evaluate`, run with `tracker`, an
    `EvaluationTracker`): the results less their samples, the hash of each task's samples
    (none when they were not logged) and the general config, with what JSON cannot hold made
    JSON as lm-eval makes it."""
    from lm_eval.utils import handle_non_serializable, hash_string

    samples = results.get("samples") or {}
    document = {key: value for key, value in results.items() if key != "samples"}
    document["task_hashes"] = {
        task: hash_string(
            "".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"] for s in rows)
        )
        for task, rows in samples.items()
    }
    tracker.general_config_tracker.log_end_time()
    document.update(asdict(tracker.general_config_tracker))
    plain: dict[str, Any] = json.loads(json.dumps(document, default=handle_non_serializable))
    return plain


def write_results(folder: Path, document: dict[str, Any]) -> Path:
    """`document` as `results_<date>.json` in `folder` (made if need be), a name no earlier
    file has; the path. Nothing is written when a number of it is NaN or infinite."""
    date_id = datetime.now().isoformat().replace(":", "-")
    path = folder / f"results_{date_id}.json"
    hint = "the model's scores are not finite (a diverged adapter?); check it with adaptlab eval"
    data = finite_json(document, path.name, hint)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data)
    return path


def metric_rows(results: dict[str, Any]) -> list[tuple[str, str, Any, Any]]:
    """Each task's (and group's) metrics as (task, metric, value, stderr); a metric computed
    after a filter other than lm-eval's `none` is shown as `metric,filter`."""
    rows = []
    for task, scores in results["results"].items():
        for key, value in scores.items():
            metric, sep, filtered = key.partition(",")
            if not sep or metric.endswith("_stderr"):
                continue
            stderr = scores.get(f"{metric}_stderr,{filtered}")
            rows.append((task, metric if filtered == "none" else key, value, stderr))
    return rows


def harness_scores(
    results: dict[str, Any], tasks: Sequence[str], num_fewshot: int | None, limit: int | None
) -> HarnessScores:
    """The numbers of `results` (from `simple_evaluate`, run on `tasks` with `num_fewshot`
    and `limit`) as a run's result keeps them: each task's metric values, and their standard
    errors where lm-eval gave them (it writes `N/A` where it could not)."""
    import lm_eval

    metrics: dict[str, dict[str, float]] = {}
    errors: dict[str, dict[str, float]] = {}
    for task, metric, value, stderr in metric_rows(results):
        if _is_number(value):
            metrics.setdefault(task, {})[metric] = float(value)
            if _is_number(stderr):
                errors.setdefault(task, {})[metric] = float(stderr)
    return HarnessScores(
        lm_eval_version=lm_eval.__version__,
        tasks=tuple(tasks),
        num_fewshot=num_fewshot,
        limit=limit,
        scores={task: TaskScores(found, errors.get(task, {})) for task, found in metrics.items()},
    )


def _is_number(value: object) -> bool:
    """Whether lm-eval gave a number (not `N/A`, a list or a flag)."""
    return isinstance(value, int | float) and not isinstance(value, bool)

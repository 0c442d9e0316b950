"""`harness:TASK`: an lm-evaluation-harness task (the built-in probe tasks,
`adaptlab.data.probe_tasks`, or any task lm-eval knows or finds in the folder given as
`include`), scored by lm-eval on each model in memory with every sample logged, so the items
are its documents and their accuracy (`acc`) is compared document by document."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.forgetting.options import ProbeOptions
from adaptlab.forgetting.paired import ItemScores
from adaptlab.forgetting.probe import Probe, ProbedModel

METRIC = "acc"


class HarnessProbe(Probe):
    """lm-eval task `task` of the index of `include` (and lm-eval's own tasks)."""

    def __init__(self, task: str, include: Path | None, limit: int, batch_size: int) -> None:
        self.name = f"harness:{task}"
        self.task, self.include, self.limit, self.batch_size = task, include, limit, batch_size

    def score(self, probed: ProbedModel, items: Sequence[str] | None = None) -> ItemScores:
        from adaptlab.integrations.lm_eval import load_tasks, score_model, task_index

        tasks = load_tasks(task_index(self.include), [self.task])  # used up per model
        scored = score_model(
            probed.model,
            probed.tokenizer,
            tasks,
            limit=self.limit,
            batch_size=self.batch_size,
            log_samples=True,
        )
        return ItemScores(METRIC, True, self._values(scored.results["samples"]))

    def details(self, base: ItemScores, adapted: ItemScores) -> dict[str, Any]:
        return {"task": self.task}

    def _values(self, samples: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
        """Each logged document's accuracy, keyed by its task and document id."""
        values = {}
        for task, documents in samples.items():
            for document in documents:
                if METRIC not in document:
                    raise ConfigError(
                        f"probe {self.name}: lm-eval task {task} scores no {METRIC!r} per "
                        "document; a harness probe needs a multiple-choice task"
                    )
                values[f"{task}/{document['doc_id']}"] = float(document[METRIC])
        return values


def harness_probe(value: str, options: ProbeOptions) -> HarnessProbe:
    """The probe of lm-eval task `value`, read from `options.include`, else the built-in
    probe tasks' folder."""
    from adaptlab.data.probe_tasks import probe_task_folder
    from adaptlab.integrations.lm_eval import check_task_names, require_lm_eval, task_index

    require_lm_eval("a harness: probe")
    include = options.include if options.include is not None else probe_task_folder()
    check_task_names(task_index(include), [value])
    return HarnessProbe(value, include, options.limit, options.batch_size)

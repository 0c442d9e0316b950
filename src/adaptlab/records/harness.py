"""lm-evaluation-harness scores of a run's trained model, as its result keeps them: per lm-eval
task (and group) each metric's value and, where lm-eval gives one, its standard error, with the
lm-eval version and the options it was scored with (a study's `harness:`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adaptlab.records.jsonfields import NOT_NEGATIVE, JsonObject


@dataclass(frozen=True)
class TaskScores:
    """One lm-eval task's metrics (`acc`, `exact_match`, `acc_norm`, or `metric,filter` for
    a filter other than lm-eval's `none`) and the standard errors lm-eval gave of them."""

    metrics: Mapping[str, float]
    stderr: Mapping[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"metrics": dict(self.metrics), "stderr": dict(self.stderr)}

    @classmethod
    def from_json(cls, scores: JsonObject) -> TaskScores:
        scores.refuse_unknown(("metrics", "stderr"))
        return cls(
            metrics=scores.numbers("metrics"),  # lm-eval's metrics, of any scale
            stderr=scores.numbers("stderr", within=NOT_NEGATIVE, diverged=True),
        )


@dataclass(frozen=True)
class HarnessScores:
    """What lm-eval scored a trained model at: `scores` per task or group, in lm-eval's order;
    `tasks`, `num_fewshot` and `limit` as they were asked (None: lm-eval's own choice, every
    example); `lm_eval_version` the lm-eval that scored it."""

    lm_eval_version: str
    tasks: tuple[str, ...]
    num_fewshot: int | None
    limit: int | None
    scores: Mapping[str, TaskScores]

    def to_dict(self) -> dict[str, Any]:
        return {
            "lm_eval_version": self.lm_eval_version,
            "tasks": list(self.tasks),
            "num_fewshot": self.num_fewshot,
            "limit": self.limit,
            "scores": {task: scores.to_dict() for task, scores in self.scores.items()},
        }

    @classmethod
    def from_json(cls, harness: JsonObject) -> HarnessScores:
        harness.refuse_unknown(("lm_eval_version", "tasks", "num_fewshot", "limit", "scores"))
        scores = harness.object("scores")
        return cls(
            lm_eval_version=harness.text("lm_eval_version"),
            tasks=harness.texts("tasks"),
            num_fewshot=harness.optional_integer("num_fewshot", least=0),
            limit=harness.optional_integer("limit", least=0),
            scores={task: TaskScores.from_json(scores.object(task)) for task in scores.data},
        )

"""lm-evaluation-harness scores a study asks for of each model it trains:

    harness: {tasks: [arc_easy, my_task], include: lm_tasks/, num_fewshot: 0, limit: 50}

`HarnessOptions` is the spec's key, checked as the spec loads (`check_harness`): lm-eval is
installed, the task folder is there (read from the spec's folder), every run trains a language
model and every task is one lm-eval knows. `HarnessRequest` is what each run is handed with
its analyses (like them, no part of the run's id); its `HarnessScorer` loads the tasks before
the run trains, scores the trained model in memory (`integrations.lm_eval.score_model`) for
the run's result, and writes lm-eval's own results file in the run's folder where the study
keeps one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, PositiveInt, field_validator

from adaptlab.data.builtin import BUILTINS
from adaptlab.errors import ConfigError
from adaptlab.integrations.lm_eval_results import harness_scores, write_results
from adaptlab.models.builtin import BUILTIN_MODELS
from adaptlab.records.harness import HarnessScores
from adaptlab.records.spec import RunSpec
from adaptlab.study.spec_data import DataEntry
from adaptlab.study.spec_fields import StrictModel, refuse_repeats
from adaptlab.tasks.registry import get_task, run_task, task_names

if TYPE_CHECKING:
    from torch import nn
    from transformers import PreTrainedTokenizerBase

    from adaptlab.integrations.lm_eval import HarnessTasks

ASKER = "a study's harness:"
"""What needs lm-eval, as the refusal when it is not installed names it."""


class HarnessOptions(StrictModel):
    """The spec's `harness:` key: lm-eval's tasks (names of tasks, groups or tags), a folder
    of the user's task YAML read beside lm-eval's own, and `evaluate`'s options."""

    tasks: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]
    include: Annotated[str, Field(min_length=1)] | None = None
    num_fewshot: Annotated[int, Field(ge=0)] | None = None
    limit: PositiveInt | None = None
    batch_size: PositiveInt = 8

    @field_validator("tasks")
    @classmethod
    def _distinct(cls, values: list[str]) -> list[str]:
        refuse_repeats(values)
        return values

    def request(self, base: Path) -> HarnessRequest:
        """What each run is handed, the task folder read from `base` (the spec's folder)."""
        include = None if self.include is None else str(include_folder(self.include, base))
        return HarnessRequest(
            tuple(self.tasks), include, self.num_fewshot, self.limit, self.batch_size
        )


def check_harness(
    options: HarnessOptions,
    folder: Path | None,
    models: Sequence[str],
    data: Sequence[DataEntry],
) -> None:
    """Refuse (ValueError, one line) what lm-eval cannot score before any run trains: lm-eval
    missing, a built-in encoder, data whose runs train no language model, a task folder that
    is not there (read from the spec's `folder`; None: not known yet, checked when the study
    is planned) and a task lm-eval does not know."""
    from adaptlab.integrations.lm_eval import check_task_names, require_lm_eval, task_index

    try:
        require_lm_eval(ASKER)
        for model in models:
            _check_model(model)
        for entry in data:
            _check_data(entry)
        if folder is not None:
            include = None if options.include is None else include_folder(options.include, folder)
            check_task_names(task_index(include), options.tasks)
    except ConfigError as error:
        raise ValueError(str(error)) from None


def include_folder(include: str, base: Path) -> Path:
    """The task folder `include` names, read from `base`; one line when it is not a folder."""
    folder = (base / Path(include).expanduser()).resolve()
    if not folder.is_dir():
        problem = "is a file" if folder.exists() else "is not there"
        raise ConfigError(
            f"include {include} ({folder}) {problem}; give the folder of your lm-eval task YAML "
            "files, relative to the spec's folder"
        )
    return folder


def _check_model(model: str) -> None:
    """A built-in encoder is refused: it predicts no next token (other models are read when
    their runs load them, and a language-model task refuses an encoder then)."""
    builtin = BUILTIN_MODELS.get(model)
    if builtin is not None and not builtin.causal_lm:
        raise ConfigError(
            f"model {model} is an encoder ({builtin.description}), which predicts no next "
            "token; lm-evaluation-harness scores causal and sequence-to-sequence LMs: drop "
            "harness: or the model"
        )


def _check_data(entry: DataEntry) -> None:
    """Data whose runs train no language model (a labelled task's: a classifier, a tagger) is
    refused, naming it."""
    from adaptlab.integrations.lm_eval import LANGUAGE_MODELS, model_head

    builtin = BUILTINS.get(entry.source)
    task = entry.options.task or (builtin.task if builtin is not None else None)
    language = ", ".join(task_names(lambda found: found.model_kind in LANGUAGE_MODELS))
    advice = f"lm-evaluation-harness scores language models (task {language}): drop harness:"
    if task is None:
        raise ConfigError(
            f"data {entry.source} names no task:, so its labels decide one (a classifier's or a "
            f"tagger's, no language model); {advice} or give the data entry such a task"
        )
    kind = get_task(task).model_kind
    if kind not in LANGUAGE_MODELS:
        raise ConfigError(
            f"data {entry.source} trains task {task}, whose model has a {model_head(kind)} "
            f"head, not a language-model head; {advice} or the data entry"
        )


@dataclass(frozen=True)
class HarnessRequest:
    """The lm-eval tasks to score each trained model on, and how (`include`: the folder of
    the user's task YAML, absolute)."""

    tasks: tuple[str, ...]
    include: str | None = None
    num_fewshot: int | None = None
    limit: int | None = None
    batch_size: int = 8

    def scorer(self, spec: RunSpec, out: str | None) -> HarnessScorer:
        """The scorer of the run of `spec` (its folder `out`, if the study keeps one), its
        tokenizer and tasks loaded now, before the run trains; a run that trains no language
        model is refused in one line naming it."""
        from adaptlab.integrations.lm_eval import (
            LANGUAGE_MODELS,
            load_tasks,
            model_head,
            task_index,
        )
        from adaptlab.models.loading import load_tokenizer

        task = run_task(spec.task)
        if task.model_kind not in LANGUAGE_MODELS:
            raise ConfigError(
                f"the run of {spec.model} on {spec.data} trains a {task.name} model (a "
                f"{model_head(task.model_kind)} head), which lm-evaluation-harness cannot score"
            )
        include = None if self.include is None else Path(self.include)
        tasks = load_tasks(task_index(include), self.tasks)
        described = {"pretrained": spec.model}
        if out is not None:
            described["adapter"] = str(Path(out) / "adapter")
        return HarnessScorer(self, load_tokenizer(spec.model), tasks, described)


class HarnessScorer:
    """Scores one run's trained model (`execute`'s `on_trained_lm`), keeping lm-eval's
    document of the scores to write in the run's folder."""

    def __init__(
        self,
        request: HarnessRequest,
        tokenizer: PreTrainedTokenizerBase,
        tasks: HarnessTasks,
        described: dict[str, Any],
    ) -> None:
        self.request = request
        self.tokenizer = tokenizer
        self.tasks = tasks
        self.described = described
        self.document: dict[str, Any] | None = None

    def __call__(self, model: nn.Module) -> HarnessScores:
        """`model`'s scores on the request's tasks, as the run's result keeps them."""
        from adaptlab.integrations.lm_eval import score_model

        asked = self.request
        scored = score_model(
            model,
            self.tokenizer,
            self.tasks,
            num_fewshot=asked.num_fewshot,
            limit=asked.limit,
            batch_size=asked.batch_size,
            described=self.described,
        )
        self.document = scored.document
        return harness_scores(scored.results, asked.tasks, asked.num_fewshot, asked.limit)

    def write(self, run_folder: Path) -> Path | None:
        """lm-eval's results file in `run_folder`'s `lm_eval/`; None where this process scored
        nothing (not the first of a run's processes)."""
        from adaptlab.engine.outputs import HARNESS_FOLDER  # imports transformers

        if self.document is None:
            return None
        return write_results(run_folder / HARNESS_FOLDER, self.document)

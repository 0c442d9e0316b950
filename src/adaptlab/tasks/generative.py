"""The base of the tasks that train a language model to generate (`causal-lm`, `sft`, `chat`,
`seq2seq`): no labels or classes, a language-model head, the loss on target tokens only, and
scores from generated text (`adaptlab.tasks.generation_metrics`) beside the perplexity of the
targets (a run of one is prepared by `adaptlab.runs.generative_run`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from adaptlab.errors import ConfigError
from adaptlab.tasks.task import Task

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from adaptlab.models.loading import ModelKind
    from adaptlab.tasks.generative_settings import GenerativeSettings
    from adaptlab.tasks.task import RunAsked


class GenerativeTask(Task):
    """A task whose model generates text: a causal LM by default."""

    model_kind: ClassVar[ModelKind] = "causal_lm"
    labelled = False
    named_labels = False
    min_labels = 0
    data_shape: ClassVar[str | None] = None
    """How its data files are read (`adaptlab.data.generative_loading.load_generative`'s `shape`);
    None: plain documents (`adaptlab.data.texts`)."""
    generates: ClassVar[bool] = True
    """Whether dev and test generate answers to score (False: perplexity alone)."""

    def settings(self, options: Mapping[str, Any]) -> GenerativeSettings:
        """A run's data `options` checked for this task (one line for a bad value): the
        generative settings they give."""
        from adaptlab.tasks.generative_settings import GenerativeSettings

        return GenerativeSettings.of(options, self.name)

    def check_run(self, spec: RunAsked, analysed: bool) -> None:
        if analysed and self.model_kind != "causal_lm":
            raise ConfigError(
                f"analyses read a classifier's or a decoder's representations; a {self.name} "
                "run (an encoder-decoder's) takes none"
            )

"""Masked-language modelling on unlabelled text: how a language adapter is made (MAD-X,
Pfeiffer et al. 2020). Its data are documents (`adaptlab.data.texts`), its model carries a
masked-LM head, and it is scored by the share of masked tokens predicted exactly and the
perplexity on them; a run of it is prepared by `adaptlab.runs.mlm_run`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adaptlab.errors import ConfigError
from adaptlab.tasks.registry import register_task
from adaptlab.tasks.task import Task

if TYPE_CHECKING:
    from adaptlab.tasks.task import RunAsked


class MaskedLanguageModelling(Task):
    """BERT's masked-LM objective on a corpus's texts."""

    name = "mlm"
    summary = "masked-language modelling of unlabelled text"
    model_kind = "masked_lm"
    labelled = False
    primary_metric = "masked_accuracy"
    metrics = ("masked_accuracy",)
    paired_metrics = ("masked_accuracy", "perplexity")
    named_labels = False
    min_labels = 0
    data_marker = "masked LM"
    data_options = ("text_column",)
    plain_text = True

    def check_run(self, spec: RunAsked, analysed: bool) -> None:
        if analysed:
            raise ConfigError("analyses need a labelled task; a masked-LM run takes none")
        if spec.fuse:
            raise ConfigError(
                "masked-LM runs train one adapter (or one stacked on others); not fusion"
            )


MLM = register_task(MaskedLanguageModelling())

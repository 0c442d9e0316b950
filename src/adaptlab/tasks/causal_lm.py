"""`causal-lm`: a decoder trained on plain text, every token a target (domain adaptation).
Documents come one per line of a .txt file, a text column or a built-in corpus's texts
(`adaptlab.data.texts`); each is cut into windows of `max_length` tokens. Dev and test score
the perplexity of held-out text, which also picks the best epoch."""

from __future__ import annotations

from adaptlab.tasks.generative import GenerativeTask
from adaptlab.tasks.generative_facts import PERPLEXITY, TOKEN_ACCURACY
from adaptlab.tasks.registry import register_task


class CausalLanguageModelling(GenerativeTask):
    """Next-token prediction on every token of unlabelled text."""

    name = "causal-lm"
    summary = "next-token prediction on plain text (domain adaptation of a decoder)"
    primary_metric = PERPLEXITY
    metrics = (TOKEN_ACCURACY,)
    paired_metrics = (PERPLEXITY, TOKEN_ACCURACY)
    generates = False
    data_marker = "causal LM"
    data_options = ("text_column", "pack", "metric")
    plain_text = True


CAUSAL_LM = register_task(CausalLanguageModelling())

"""A probe of encoded examples (`EncodedExample`: token ids and target labels): each item's
value is its mean next-token negative log-likelihood over its target tokens (lower is better),
so the forgetting is the mean rise in nats per target token; the result also gives each
model's perplexity (the exponential of the mean) and token accuracy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.engine.packing import Encoded
from adaptlab.finite import exp_or_inf
from adaptlab.forgetting.paired import ItemScores
from adaptlab.forgetting.probe import Probe, ProbedModel
from adaptlab.forgetting.token_scores import token_scores

NLL = "nll"
"""The measure: mean negative log-likelihood per target token, in nats."""


class LossProbe(Probe):
    """The mean target-token NLL of each of `examples`."""

    def __init__(self, name: str, examples: Sequence[Encoded], batch_size: int) -> None:
        self.name = name
        self.examples = tuple(examples)
        self.batch_size = batch_size

    def score(self, probed: ProbedModel, items: Sequence[str] | None = None) -> ItemScores:
        scores = token_scores(
            probed.model,
            probed.tokenizer,
            self.examples,
            batch_size=self.batch_size,
            progress=probed.progress,
            desc=self.name,
        )
        values = {str(i): s.nll for i, s in enumerate(scores)}
        mean_nll = sum(values.values()) / len(values)
        accuracy = sum(s.accuracy for s in scores) / len(scores)
        summary = {"perplexity": exp_or_inf(mean_nll), "token_accuracy": accuracy}
        return ItemScores(NLL, False, values, summary)

    def details(self, base: ItemScores, adapted: ItemScores) -> dict[str, Any]:
        return {
            "target_tokens": sum(
                label != IGNORE_INDEX for e in self.examples for label in e.labels[1:]
            ),
            **{f"base_{k}": v for k, v in base.summary.items()},
            **{f"adapted_{k}": v for k, v in adapted.summary.items()},
        }

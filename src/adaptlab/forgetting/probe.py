"""A source probe: something the base model could do before adaptation, scored item by item on
the base and on the adapted model with the same code (`score`), and compared (`compare`)."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.forgetting.paired import Forgetting, ItemScores, paired_forgetting


@dataclass(frozen=True)
class ProbedModel:
    """The model a probe scores, with its tokenizer; `progress` shows a bar while it does."""

    model: nn.Module
    tokenizer: PreTrainedTokenizerBase
    progress: bool = False


class Probe(abc.ABC):
    """One probe; `name` is how results name it (`kind:value`)."""

    name: str

    @abc.abstractmethod
    def score(self, probed: ProbedModel, items: Sequence[str] | None = None) -> ItemScores:
        """`model`'s value on every item of the probe (on `items` at least, when given)."""

    def compared_items(self, base: ItemScores) -> list[str]:
        """The items the adapted model is compared with `base` on (every one, unless a probe
        says otherwise)."""
        return list(base.values)

    def compare(self, base: ItemScores, adapted: ItemScores) -> Forgetting:
        """The forgetting from `base` to `adapted` over the compared items."""
        items = self.compared_items(base)
        return paired_forgetting(self.name, base, adapted, items, self.details(base, adapted))

    def details(self, base: ItemScores, adapted: ItemScores) -> dict[str, Any]:
        """What the result shows beside the mean values (nothing unless a probe says)."""
        return {}

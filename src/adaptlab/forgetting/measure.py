"""Score probes on the adapted model and on its base (the same model object with adaptation
switched off, `adaptlab.disabled`), with the same code, and compare them."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence

from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.forgetting.paired import Forgetting, ItemScores
from adaptlab.forgetting.probe import Probe, ProbedModel
from adaptlab.methods.adapt import disabled


def measure_forgetting(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    probes: Sequence[Probe],
    *,
    base_scores: MutableMapping[str, ItemScores] | None = None,
    progress: bool = False,
) -> list[Forgetting]:
    """Each probe's forgetting from the base of adapted `model` to `model`. `base_scores`
    keeps the base's scores by probe name: the base of every run of one model is the same,
    so a study scores it once (give one mapping per base model)."""
    results = []
    for probe in probes:
        base = None if base_scores is None else base_scores.get(probe.name)
        if base is None:
            with disabled(model) as plain:
                base = probe.score(ProbedModel(plain, tokenizer, progress))
            if base_scores is not None:
                base_scores[probe.name] = base
        adapted = probe.score(ProbedModel(model, tokenizer, progress), probe.compared_items(base))
        results.append(probe.compare(base, adapted))
    return results

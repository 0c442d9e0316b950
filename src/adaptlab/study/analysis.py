"""Analyses a study asks for (`analysis: [rsa, landscape]`), run on each trained model.

Each run's trained model, still in memory, is compared with its own base (adaptation switched
off) on its dev set: per-layer RSA or linear CKA (paper-effectiveness §2.2) and the loss
landscape (§5). The results join the run's record under "analysis", for the report. A
language model's run is scored with lm-evaluation-harness instead (`harness:`, `study.harness`),
its scores joining the record under "harness".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from adaptlab.analysis.landscape import loss_landscape
from adaptlab.analysis.similarity import compare_to_base
from adaptlab.analysis.tokens import DEFAULT_TOKENS, eligible_tokens, sample_tokens
from adaptlab.engine.trained_run import OnTrained, TrainedRun
from adaptlab.study.harness import HarnessRequest

AnalysisName = Literal["rsa", "cka", "landscape"]
SIMILARITIES = ("rsa", "cka")
SAMPLE_SEED = 0


@dataclass(frozen=True)
class AnalysisRequest:
    """Which analyses to run after training, how many dev tokens RSA / CKA sample, and the
    lm-eval tasks to score a trained language model on (None: none)."""

    names: tuple[str, ...] = ()
    tokens: int = DEFAULT_TOKENS
    harness: HarnessRequest | None = None

    def hook(self) -> OnTrained | None:
        """The `execute` callback doing the analyses, or None when none are asked for."""
        return self._analyse if self.names else None

    def _analyse(self, run: TrainedRun) -> Mapping[str, Any]:
        dev = run.features["dev"]
        results: dict[str, Any] = {}
        measures = [name for name in self.names if name in SIMILARITIES]
        if measures:
            special = run.encoder.tokenizer.all_special_ids
            available = len(eligible_tokens(dev, special))  # a small dev set gives what it has
            sample = sample_tokens(dev, special, min(self.tokens, available), SAMPLE_SEED)
            scores = compare_to_base(run.model, run.encoder, dev, sample, measures)
            results |= {name: scores[name].to_dict() for name in measures}
        if "landscape" in self.names:
            curve = loss_landscape(
                run.model, run.encoder, dev, run.dataset.task, run.dataset.label_names
            )
            results["landscape"] = curve.to_dict()
        return results

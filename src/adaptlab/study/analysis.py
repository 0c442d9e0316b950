"""Analyses a study asks for (`analysis: [rsa, landscape, spectrum]`, `forgetting:`), run on
each trained model.

Each run's trained model, still in memory, is compared with its own base (adaptation switched
off) on its dev set: per-layer RSA or linear CKA (paper-effectiveness §2.2) and the loss
landscape (§5); the spectrum of its weight updates is read from its weights
(`adaptlab.analysis.updates`), and its forgetting on source probes measured
(`study.forgetting`). RSA and CKA read a labelled run's and a decoder's (causal-lm, sft, chat)
alike, a decoder's on the tokens its loss reads (`adaptlab.analysis.tokens`); the landscape
reads a labelled run's loss, and an encoder-decoder's run (seq2seq) takes no analysis, both
refused as the spec loads (`check_analysis`). The results join the run's record under
"analysis", for the report. A language model's run is scored with lm-evaluation-harness too
(`harness:`, `study.harness`), its scores joining the record under "harness".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from adaptlab.analysis.landscape import loss_landscape
from adaptlab.analysis.similarity import compare_to_base
from adaptlab.analysis.tokens import DEFAULT_TOKENS, eligible_tokens, sample_tokens
from adaptlab.analysis.updates import model_spectrum
from adaptlab.engine.trained_run import OnTrained, TrainedRun
from adaptlab.errors import ConfigError
from adaptlab.study.forgetting import ForgettingRequest
from adaptlab.study.harness import HarnessRequest
from adaptlab.study.spec_data import DataEntry
from adaptlab.study.spec_generative import generative_task

AnalysisName = Literal["rsa", "cka", "landscape", "spectrum"]
SIMILARITIES = ("rsa", "cka")
SAMPLE_SEED = 0


@dataclass(frozen=True)
class AnalysisRequest:
    """Which analyses to run after training, how many dev tokens RSA / CKA sample, the lm-eval
    tasks to score a trained language model on and the forgetting probes (None: none)."""

    names: tuple[str, ...] = ()
    tokens: int = DEFAULT_TOKENS
    harness: HarnessRequest | None = None
    forgetting: ForgettingRequest | None = None

    def hook(self) -> OnTrained | None:
        """The `execute` callback doing the analyses, or None when none are asked for."""
        return self._analyse if self.names or self.forgetting is not None else None

    def _analyse(self, run: TrainedRun) -> Mapping[str, Any]:
        dev = run.features["dev"]
        results: dict[str, Any] = {}
        measures = [name for name in self.names if name in SIMILARITIES]
        if measures:
            if run.collator is None:
                raise ConfigError(f"a {run.task} run (an encoder-decoder's) takes no rsa or cka")
            special = run.tokenizer.all_special_ids
            available = len(eligible_tokens(dev, special))  # a small dev set gives what it has
            sample = sample_tokens(dev, special, min(self.tokens, available), SAMPLE_SEED)
            scores = compare_to_base(run.model, run.collator, dev, sample, measures)
            results |= {name: scores[name].to_dict() for name in measures}
        if "landscape" in self.names:
            if run.encoder is None or run.dataset is None:
                raise ConfigError(f"a {run.task} run has no loss landscape: {LANDSCAPE_READS}")
            dataset = run.dataset
            curve = loss_landscape(run.model, run.encoder, dev, dataset.task, dataset.label_names)
            results["landscape"] = curve.to_dict()
        if "spectrum" in self.names:
            spectrum = model_spectrum(run.model)
            results["spectrum"] = {k: v for k, v in spectrum.items() if k != "matrices"}
        if self.forgetting is not None:
            base = str(getattr(run.model, "name_or_path", ""))
            test = run.features["test"]
            results["forgetting"] = self.forgetting.measure(
                run.model, run.tokenizer, base, run.task, test
            )
        return results


LANDSCAPE_READS = "landscape reads a labelled run's loss over its classes"


def check_analysis(names: Sequence[str], data: Sequence[DataEntry]) -> None:
    """Refuse (ValueError, one line) analyses a data entry's runs cannot take, before any run
    trains: any of an encoder-decoder's (seq2seq), the landscape of a generative task's."""
    if not names:
        return
    for entry in data:
        task = generative_task(entry.options.task)
        if task is None:
            continue
        if task.model_kind != "causal_lm":
            raise ValueError(
                f"data {entry.source} trains task {task.name}, an encoder-decoder, whose runs "
                "take no analysis: drop analysis: or the data entry"
            )
        if "landscape" in names:
            raise ValueError(
                f"data {entry.source} trains task {task.name}, and analysis {LANDSCAPE_READS}: "
                "keep rsa and cka for it, or drop the data entry"
            )

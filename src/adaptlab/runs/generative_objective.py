"""Training a language model on target tokens (`Objective`): batches of encoded examples,
padded or packed (`adaptlab.engine.packing`: several examples a row, none attending to
another), the mean next-token cross-entropy over the target tokens, chunked so the logits
never exist whole, and the dev split scored every epoch (`generative_evaluation`). The best
epoch is the one of lowest dev perplexity, or of highest value of a generative metric.

Each epoch's training throughput, in target tokens per second, is logged and recorded with
the dev scores (`target_tokens_per_second`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.engine.objective import DevScore, TensorBatch
from adaptlab.engine.packing import collate_packed, pack
from adaptlab.engine.packing_attention import packing_attention
from adaptlab.runs.generative_evaluation import (
    Encoded,
    Generation,
    GenerativeSplit,
    Scored,
    padded_batch,
    score_split,
    target_scores,
    target_terms,
)
from adaptlab.tasks.generative_facts import PERPLEXITY

log = logging.getLogger("adaptlab.train")

THROUGHPUT = "target_tokens_per_second"


class GenerativeLm:
    """Train `model` on `train`'s target tokens; score each epoch on `dev` (`Objective`)."""

    title = ""

    def __init__(
        self,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        train: Sequence[Encoded],
        dev: GenerativeSplit,
        *,
        metric: str,
        generation: Generation | None,
        packed_length: int | None,
        eval_batch_size: int,
    ) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.train_examples, self.dev_split = train, dev
        self.metric, self.generation = metric, generation
        self.eval_batch_size = eval_batch_size
        self.pad_id: int = tokenizer.pad_token_id
        self.device = next(model.parameters()).device
        self.rows: list[list[int]] | None = None
        if packed_length is not None:  # the attention refused first when it cannot pack
            self.attention = packing_attention(model, packed_length)
            self.rows = pack([len(e.input_ids) for e in train], packed_length)
        self._tokens = 0  # this epoch's target tokens so far, since `_began`
        self._began: float | None = None

    @property
    def examples(self) -> int:
        """Training rows an epoch goes through: examples, or packed rows of them."""
        return len(self.train_examples) if self.rows is None else len(self.rows)

    def batch(self, indices: list[int], generator: torch.Generator) -> TensorBatch:
        if self._began is None:
            self._began = time.perf_counter()
        if self.rows is None:
            batch = padded_batch(self.model, [self.train_examples[i] for i in indices], self.pad_id)
        else:
            rows = [[self.train_examples[i] for i in self.rows[row]] for row in indices]
            batch = collate_packed(rows, self.pad_id, self.attention)
        self._tokens += self.loss_terms(batch)
        return {k: v.to(self.device) for k, v in batch.items()}

    def loss(self, batch: TensorBatch) -> torch.Tensor:
        return target_scores(self.model, batch).mean()

    def loss_terms(self, batch: TensorBatch) -> int:
        """The target tokens the loss is the mean over (a decoder's: those after each row's
        first)."""
        return target_terms(self.model, batch)

    def dev(self) -> DevScore:
        throughput = self._throughput()
        scored = self.score(self.dev_split)
        metrics = (
            scored.metrics if throughput is None else {**scored.metrics, THROUGHPUT: throughput}
        )
        return DevScore(scored.loss, metrics, self.judged(scored))

    def score(self, split: GenerativeSplit) -> Scored:
        """`split` scored by the model as it is now."""
        return score_split(self.model, self.tokenizer, split, self.generation, self.eval_batch_size)

    def judged(self, scored: Scored) -> float:
        """The score the best epoch is chosen by (higher is better)."""
        return -scored.loss if self.metric == PERPLEXITY else scored.metrics[self.metric]

    def _throughput(self) -> float | None:
        """Target tokens per second since the epoch's first batch (logged); None when nothing
        was trained since (a run resumed at an epoch's end)."""
        if self._began is None:
            return None
        seconds = time.perf_counter() - self._began
        throughput = self._tokens / seconds if seconds > 0 else 0.0
        log.info(
            "trained %d target tokens in %.1f s: %.1f target tokens per second",
            *(self._tokens, seconds, throughput),
        )
        self._tokens, self._began = 0, None
        return throughput

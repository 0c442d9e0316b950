"""Masked-language-model training on unlabelled text: how a language adapter is made.

MAD-X (Pfeiffer et al. 2020; the AdapterHub slides' Quechua example): a language adapter is
trained with the masked-LM objective on a language's unlabelled text, the model frozen; a
task adapter is then trained stacked on the source language's adapter (frozen), and at test
time the target language's adapter takes its place. Masking is BERT's
(`adaptlab.data.masking`). A model without a masked-LM head (a sentence encoder such as e5)
gets transformers' head for its architecture, newly initialised and tied to the word
embeddings: its transform and LayerNorm train with the adapter and are saved with it.

Only the masked positions reach the head: a forward hook on the base model keeps their
hidden states alone, so the vocabulary-sized output (250,037 words for XLM-R's) is computed
for 15% of the tokens instead of all of them.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.data.masking import MaskedLmEncoder
from adaptlab.data.texts import TextCorpus, load_texts, sample_texts
from adaptlab.errors import ConfigError
from adaptlab.models.device import torch_device
from adaptlab.models.loading import load_model
from adaptlab.models.resolve import resolve_model
from adaptlab.progress import Progress
from adaptlab.tasks import MLM
from adaptlab.train.adapters import attach_adapters
from adaptlab.train.batches import batch_count
from adaptlab.train.choice import choose_metric
from adaptlab.train.config import TrainConfig
from adaptlab.train.inputs import run_inputs
from adaptlab.train.loop import (
    BestEpoch,
    TrainHistory,
    apply_step,
    optimizer_and_schedule,
    stop_unless_finite,
)
from adaptlab.train.memory import peak_memory_bytes, reset_peak_memory
from adaptlab.train.metrics import PRIMARY_METRIC
from adaptlab.train.result import DataInfo, EpochRecord, RunResult, Versions
from adaptlab.train.run_folder import RunFolder
from adaptlab.train.spec import RunSpec
from adaptlab.train.split_record import SplitRecord

log = logging.getLogger("adaptlab.train")

MLM_METRIC = PRIMARY_METRIC[MLM]
"""Share of masked tokens predicted exactly (masked_accuracy); it picks the best epoch on dev."""
EVAL_MASK_SEED = 12345
"""Dev and test masks are drawn from this seed, the same every epoch and every run."""


@dataclass(frozen=True)
class MlmEvaluation:
    """Mean loss per masked token, and the metrics (masked accuracy, perplexity)."""

    loss: float
    metrics: dict[str, float]


@contextmanager
def hidden_states_at(model: nn.Module, chosen: torch.Tensor) -> Iterator[None]:
    """While inside, the base model hands the LM head only its hidden states at `chosen`
    (a boolean (batch, length) mask), as one sequence: (1, positions, hidden)."""
    prefix = getattr(model, "base_model_prefix", "")
    base = getattr(model, prefix, None) if prefix else None
    if not isinstance(base, nn.Module):
        raise ConfigError(f"{type(model).__name__} has no base model under an LM head")

    def keep_chosen(module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
        picked = output[0][chosen].unsqueeze(0)
        if isinstance(output, tuple):
            return (picked, *output[1:])
        output.last_hidden_state = picked
        return output

    hook = base.register_forward_hook(keep_chosen)
    try:
        yield
    finally:
        hook.remove()


def masked_lm_loss(
    model: nn.Module, batch: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, int, int]:
    """Cross-entropy over the masked tokens, how many were predicted right, how many there are."""
    labels = batch["labels"]
    chosen = labels.ne(IGNORE_INDEX)
    with hidden_states_at(model, chosen):
        logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
    targets = labels[chosen]
    if logits.shape[:2] != (1, len(targets)):
        raise ConfigError(
            f"{type(model).__name__}: its LM head did not read the base model's output"
        )
    logits = logits[0].float()
    loss = F.cross_entropy(logits, targets)
    return loss, int((logits.argmax(-1) == targets).sum()), len(targets)


def masked_batches(
    encoder: MaskedLmEncoder,
    features: Sequence[dict[str, Any]],
    batch_size: int,
    device: torch.device,
    generator: torch.Generator,
    shuffle: bool,
) -> Iterator[dict[str, torch.Tensor]]:
    """Masked, padded batches; shuffled and masked with draws from `generator`."""
    order = torch.randperm(len(features), generator=generator).tolist() if shuffle else None
    indices = order if order is not None else list(range(len(features)))
    for start in range(0, len(indices), batch_size):
        chunk = [features[i] for i in indices[start : start + batch_size]]
        yield {k: v.to(device) for k, v in encoder.collate(chunk, generator).items()}


@torch.no_grad()
def evaluate_mlm(
    model: nn.Module,
    encoder: MaskedLmEncoder,
    features: Sequence[dict[str, Any]],
    batch_size: int = 64,
) -> MlmEvaluation:
    """Masked-token loss, accuracy and perplexity, with the fixed evaluation masks."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    generator = torch.Generator().manual_seed(EVAL_MASK_SEED)
    total_loss, correct, count = 0.0, 0, 0
    for batch in masked_batches(encoder, features, batch_size, device, generator, False):
        loss, right, masked = masked_lm_loss(model, batch)
        total_loss += float(loss) * masked
        correct, count = correct + right, count + masked
    model.train(was_training)
    mean = total_loss / count
    return MlmEvaluation(mean, {MLM_METRIC: correct / count, "perplexity": math.exp(mean)})


def train_mlm(
    model: nn.Module,
    encoder: MaskedLmEncoder,
    train_features: Sequence[dict[str, Any]],
    dev_features: Sequence[dict[str, Any]],
    config: TrainConfig,
    learning_rate: float,
    *,
    progress: bool = True,
) -> TrainHistory:
    """Train the trainable parameters on masked tokens; keep the best dev epoch's weights."""
    device = next(model.parameters()).device
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    total_steps = batch_count(len(train_features), config.batch_size) * config.epochs
    optimizer, scheduler = optimizer_and_schedule(trainable, config, learning_rate, total_steps)
    generator = torch.Generator().manual_seed(config.seed)
    torch.manual_seed(config.seed)  # dropout masks
    history = TrainHistory(metric=MLM_METRIC)
    best = BestEpoch(trainable, history)
    step = 0
    bar = Progress(total_steps, unit="step", enabled=progress, lines=0)  # a line per epoch
    for epoch in range(1, config.epochs + 1):
        model.train()
        started, losses = time.perf_counter(), []
        bar.describe(f"epoch {epoch}/{config.epochs}")
        batches = masked_batches(
            encoder, train_features, config.batch_size, device, generator, True
        )
        for batch in batches:
            loss, _, _ = masked_lm_loss(model, batch)
            stop_unless_finite(loss, f"at epoch {epoch}, step {step + 1}", learning_rate, bar)
            losses.append(apply_step(loss, optimizer, scheduler, trainable, config.max_grad_norm))
            step += 1
            bar.update()
            bar.show(loss=f"{losses[-1]:.4f}")
        dev = evaluate_mlm(model, encoder, dev_features, config.eval_batch_size)
        record = EpochRecord(
            epoch=epoch,
            step=step,
            train_loss=sum(losses) / len(losses),
            dev_loss=dev.loss,
            dev_metrics=dev.metrics,
            seconds=time.perf_counter() - started,
        )
        history.epochs.append(record)
        score = dev.metrics[MLM_METRIC]
        log.info(
            "epoch %d step %d train_loss %.4f dev_loss %.4f dev_%s %.4f",
            *(epoch, step, record.train_loss, dev.loss, MLM_METRIC, score),
        )
        best.offer(epoch, score)
        bar.show(loss=f"{record.train_loss:.4f}", **{f"dev_{MLM_METRIC}": f"{score:.4f}"})
        bar.line()
    bar.close()
    best.restore()
    return history


def prepare_texts(spec: RunSpec) -> TextCorpus:
    """The run's documents, sampled to `train_size` when it is set."""
    corpus = load_texts(spec.data, **spec.data_options)
    if spec.train_size is not None:
        corpus = sample_texts(corpus, spec.train_size, spec.train.seed)
    return corpus


def execute_mlm(
    spec: RunSpec,
    out: str | os.PathLike[str] | None = None,
    *,
    progress: bool = True,
    overwrite: bool = False,
) -> RunResult:
    """`execute` for task mlm: train the adapter by masked-LM on the texts, test it, save it."""
    started = time.perf_counter()
    if spec.fuse:
        raise ConfigError("masked-LM runs train one adapter (or one stacked on others); not fusion")
    folder = RunFolder(Path(out) if out is not None else None, overwrite, run_inputs(spec))
    device = torch_device(spec.device)
    resolve_model(spec.model)  # a missing or incomplete model folder fails before the data loads
    corpus = prepare_texts(spec)
    loaded = load_model(spec.model, "masked_lm", seed=spec.train.seed)
    model: nn.Module = loaded.model
    model.to(device)
    handle = attach_adapters(model, spec)
    encoder = MaskedLmEncoder(loaded.tokenizer, spec.train.max_length)
    features = {name: encoder.encode(texts) for name, texts in corpus.splits.items()}
    with folder:
        log.info("run %s", json.dumps(spec.to_dict()))
        log.info("%s", handle.summary())
        reset_peak_memory(device)
        history = train_mlm(
            model,
            encoder,
            features["train"],
            features["dev"],
            spec.train,
            spec.learning_rate(),
            progress=progress,
        )
        test = evaluate_mlm(model, encoder, features["test"], spec.train.eval_batch_size)
        log.info("test %s", json.dumps(test.metrics))
        counts = handle.parameter_counts()
        result = RunResult(
            spec=spec,
            data=DataInfo(
                name=corpus.name,
                task=MLM,
                labels=(),
                sizes={k: len(v) for k, v in corpus.splits.items()},
            ),
            metric=history.metric,
            judged_by=choose_metric(MLM, None),
            epochs=tuple(history.epochs),
            best_epoch=history.best_epoch,
            dev=history.best.dev_metrics,
            test=test.metrics,
            test_loss=test.loss,
            trainable_parameters=counts["trainable"],
            total_parameters=counts["total"],
            parameter_groups={k: v for k, v in counts.items() if k not in ("trainable", "total")},
            adapter_tensor_bytes=handle.tensor_bytes(),
            peak_memory_bytes=peak_memory_bytes(device),
            versions=Versions.current(),
            host=socket.gethostname(),
        )
        splits = SplitRecord.of(spec.data, corpus.origins)
        return folder.publish(model, result, MLM, (), started, splits)

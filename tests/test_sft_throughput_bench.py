"""`benchmarks/sft_throughput.py` on its smallest path: a tiny random Llama, a handful of
prompt-completion pairs and chats, one timed step. adaptlab and TRL train the same rows in the
same order, and every fake-tensor count equals the real one."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
import torch
from tiny_models import save_tiny_llama

from adaptlab.data.generative import (
    Conversation,
    GenerativeCorpus,
    GenerativeExample,
    PromptCompletion,
    Turn,
)
from adaptlab.models.loading import load_tokenizer

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
CITIES = ["Paris", "Rome", "Oslo", "Lima", "Bern", "Riga", "Kyiv", "Doha", "Baku", "Male"]


def corpus(name: str, shape: str) -> GenerativeCorpus:
    """Short questions or chats in place of the built-in corpus `name`."""
    examples: list[GenerativeExample]
    if shape == "prompt-completion":
        examples = [
            PromptCompletion(f"What is the capital of country {i}?\nAnswer:", f" {city}")
            for i, city in enumerate(CITIES * 3)
        ]
    else:
        examples = [
            Conversation(
                (
                    Turn("system", "Reply as Joey."),
                    Turn("user", f"Ross: Where is {city}?"),
                    Turn("assistant", f"{city} is far."),
                )
            )
            for city in CITIES
        ]
    splits = {"train": tuple(examples), "dev": tuple(examples[:1]), "test": tuple(examples[:1])}
    return GenerativeCorpus(name, splits, "test corpus")


def test_smallest_run_trains_the_same_rows_and_counts_fake_as_real(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = save_tiny_llama(str(tmp_path / "model"))
    tokenizer = load_tokenizer(model)
    tokenizer.eos_token = "[SEP]"  # completions end with it, on both sides
    tokenizer.save_pretrained(model)
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    routes = importlib.import_module("sft_routes")
    monkeypatch.setattr(routes, "load_generative", lambda name, tasks, shape: corpus(name, shape))
    script = importlib.import_module("sft_throughput")
    out = tmp_path / "sft.json"
    argv = ["--quick", "--model", model, "--max-length", "96", "--fake-shape", "tiny"]
    argv += ["--threads", str(torch.get_num_threads())]  # the test process's, unchanged
    argv += ["--fake-tokens", "32", "--check-tokens", "32", "--out", str(out)]
    assert script.main(argv) == 0
    report = json.loads(out.read_text())
    assert [c["corpus"] for c in report["corpora"]] == ["countries-qa", "friends-chat"]
    for measured in report["corpora"]:
        ours, packed, padded = measured["results"]
        assert [ours["route"], packed["route"], padded["route"]] == [
            "adaptlab",
            "TRL packed",
            "TRL padded",
        ]
        assert all(r["steps"] == 3 and r["peak_bytes"] > 0 for r in measured["results"])
        assert all(r["target_tokens_per_second"] > 0 for r in measured["results"])
        assert packed["same_order"] and padded["same_order"]
        assert packed["target_tokens_per_step"] == ours["target_tokens_per_step"]
        assert packed["examples"] == ours["examples"] == measured["examples"]
        assert packed["examples_per_step"] == ours["examples_per_step"]
        assert padded["examples_per_step"] == [1, 1, 1]  # --quick: batch 1
        assert padded["same_encoding"] == measured["examples"]
        assert [g["op"] for g in measured["goals"]] == [">=", ">=", "<="]
    memory = report["loss_memory"]
    assert [row["setup"] for row in memory["rows"]] == ["adaptlab", "trl", "logits"]
    assert all(check["equal"] and check["real_bytes"] > 0 for check in memory["checks"])
    assert "TRL packed" in report["table"]
    for name in ("sft_throughput", "sft_routes"):
        sys.modules.pop(name, None)

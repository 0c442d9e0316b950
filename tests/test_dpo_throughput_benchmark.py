"""`benchmarks/dpo_throughput.py` on its smallest path (`--quick`): a tiny random Llama, a
handful of question pairs, two timed rounds. adaptlab and TRL step on the same tokens, both
start at log 2 (the adapter starts at zero, so the policy is its reference), and every
fake-tensor count equals the real one."""

from __future__ import annotations

import importlib
import json
import math
import sys
from pathlib import Path

import pytest
import torch
from tiny_models import save_tiny_llama

from adaptlab.data.preference import Preference, PreferenceCorpus
from adaptlab.models.loading import load_tokenizer

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
CITIES = ["Paris", "Rome", "Oslo", "Lima", "Bern", "Riga", "Kyiv", "Doha", "Baku", "Male"]


def pairs(name: str, tasks: object, shape: str) -> PreferenceCorpus:
    """Short questions, the right capital chosen and another rejected, in place of `name`."""
    examples = tuple(
        Preference(
            f"What is the capital of country {i}?\nAnswer:",
            f" {city}",
            f" {CITIES[(i + 3) % len(CITIES)]} city" if i % 2 else " Nowhere",
        )
        for i, city in enumerate(CITIES)
    )
    splits = {"train": examples, "dev": examples[:1], "test": examples[:1]}
    return PreferenceCorpus(name, splits, "test pairs")


def test_quick_run_steps_both_sides_on_the_same_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = save_tiny_llama(str(tmp_path / "model"))
    tokenizer = load_tokenizer(model)
    tokenizer.eos_token = "[SEP]"  # answers end with it, on both sides
    tokenizer.save_pretrained(model)
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    script = importlib.import_module("dpo_throughput")
    monkeypatch.setattr(script, "load_preferences", pairs)
    out = tmp_path / "dpo.json"
    argv = ["--quick", "--model", model, "--max-length", "64", "--out", str(out)]
    argv += ["--threads", str(torch.get_num_threads())]  # the test process's, unchanged
    assert script.main(argv) == 0
    report = json.loads(out.read_text())
    measured = report["throughput"]
    ours, theirs = measured["results"]
    assert [ours["side"], theirs["side"]] == ["adaptlab", "TRL"]
    batches = measured["batches"]
    assert len(batches) == 4  # 1 warm-up, 2 rounds, 1 profiled
    assert measured["same_tokens"] == 4 and all(b["equal"] for b in batches)
    assert all(b["shape"][0] == 4 and b["answer_tokens"] > 0 for b in batches)
    for side in (ours, theirs):
        assert len(side["seconds_per_step"]) == 2 and side["pairs_per_second"] > 0
        assert len(side["losses"]) == 4 and side["peak_bytes"] > 0
        assert side["losses"][0] == pytest.approx(math.log(2), abs=1e-6)
    assert ours["trainable"] == theirs["trainable"] > 0
    assert [g["op"] for g in measured["goals"]] == [">=", ">=", "<="]
    memory = report["fake_memory"]
    assert memory["shape"] == "tiny"
    setups = [row["setup"] for row in memory["rows"]]
    assert setups == ["adaptlab", "trl", "adaptlab-bf16", "trl-bf16"]
    assert all(row["fake"] and row["peak_bytes"] > row["start_bytes"] for row in memory["rows"])
    assert all(check["equal"] and check["real_bytes"] > 0 for check in memory["checks"])
    assert "same tokens on both sides in 4 of 4 batches" in report["table"]
    sys.modules.pop("dpo_throughput", None)

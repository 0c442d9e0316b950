"""`adaptlab.load_adapter` takes a run folder as every command does (its `adapter/` inside)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_models import tiny_inputs

import adaptlab
from adaptlab.errors import AdapterFileError
from adaptlab.models import load_model


def test_a_run_folder_loads_like_its_adapter_folder(tiny_model_dir: str, trained: Path) -> None:
    outputs = []
    for folder in (trained, trained / "adapter"):
        loaded = load_model(tiny_model_dir, "single_label", label_names=["fresh", "rotten"])
        adaptlab.load_adapter(loaded.model, folder)
        loaded.model.eval()
        with torch.no_grad():
            outputs.append(loaded.model(**tiny_inputs()).logits)
    torch.testing.assert_close(outputs[0], outputs[1], rtol=0, atol=0)


def test_a_folder_that_is_neither_is_one_line(tiny_model_dir: str, tmp_path: Path) -> None:
    loaded = load_model(tiny_model_dir, "single_label", label_names=["a", "b"])
    with pytest.raises(AdapterFileError, match="no such adapter or run folder"):
        adaptlab.load_adapter(loaded.model, tmp_path / "missing")

"""PEFT LoRA folders for `adaptlab import --format peft` tests: their LoRA pairs given values,
edited copies, and imports of them that must be refused."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import safetensors.torch
import torch
from cli_cases import copy_tree, refused, unchanged

from adaptlab.methods.peft_config import CONFIG_FILE
from adaptlab.methods.peft_format import TENSOR_FILE

LABELS = "fresh,rotten"
ConfigEdit = Callable[[dict[str, Any]], None]
TensorEdit = Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]


def give_lora_pairs_values(*models: torch.nn.Module) -> None:
    """Draw every LoRA `B` (which starts at zero) so that each pair changes the forward."""
    with torch.no_grad():
        for model in models:
            for name, param in model.named_parameters():
                if name.endswith(".B"):
                    param.normal_(0, 0.1)


def edited(
    setup: Mapping[str, Any],
    work: Path,
    config: ConfigEdit | None = None,
    tensors: TensorEdit | None = None,
) -> Path:
    """A copy of the PEFT folder `setup["root"] / "peft"` in `work` with its config and tensors
    edited."""
    folder = copy_tree(setup["root"] / "peft", work / "peft")
    if config is not None:
        data = json.loads((folder / CONFIG_FILE).read_text())
        config(data)
        (folder / CONFIG_FILE).write_text(json.dumps(data))
    if tensors is not None:
        path = folder / TENSOR_FILE
        path.write_bytes(safetensors.torch.save(tensors(safetensors.torch.load_file(str(path)))))
    return folder


def import_args(model: Path, source: Path, *extra: str) -> list[str]:
    """`adaptlab import --format peft` of `source` onto `model`, written beside `source`."""
    return ["import", "--format", "peft", "--model", str(model), str(source),
            str(source.parent / "out"), *extra]  # fmt: skip


def import_refused(
    setup: Mapping[str, Any],
    source: Path,
    capsys: pytest.CaptureFixture[str],
    *needles: str,
    extra: tuple[str, ...] = ("--labels", LABELS),
) -> str:
    """`adaptlab import` of `source` onto `setup["model"]` fails in one line holding every
    needle; nothing is written and nothing under `setup["root"]` or beside `source` changes."""
    with unchanged(setup["root"]), unchanged(source.parent):
        line = refused(import_args(setup["model"], source, *extra), capsys, *needles)
    assert not (source.parent / "out").exists()
    return line

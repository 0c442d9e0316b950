"""A PEFT LoRA folder read and checked as untrusted input before it reaches any model: its
config by `adaptlab.methods.peft_config` (every field, the task type, the scaling), its files as
the folder's own (no links, no pickle: a folder with only `adapter_model.bin` is refused), its
tensors with `adaptlab.models.tensor_checks` and as LoRA pairs of rank r whose update
(lora_alpha / r) B A stays the size of a trained weight, and no tensor PEFT writes only for
options adaptlab does not take (DoRA, LoRA of embeddings or biases). Fitting it to a model:
`adaptlab.methods.peft_import`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from adaptlab.errors import AdapterFileError
from adaptlab.methods.peft_config import PeftConfig, folder_file, read_peft_config
from adaptlab.methods.peft_format import PREFIX, TENSOR_FILE
from adaptlab.models.tensor_checks import MAX_MAGNITUDE, read_tensor_file


@dataclass(frozen=True)
class PeftAdapter:
    """A PEFT LoRA folder, read and checked apart from any model (`read_peft`)."""

    folder: Path
    config: PeftConfig
    pairs: Mapping[str, tuple[torch.Tensor, torch.Tensor]]
    """Each target module's LoRA pair (A, B), by the module's name in the model."""
    head: Mapping[str, torch.Tensor]
    """The tensors of the modules `modules_to_save` names, by parameter name in the model."""


def read_peft(folder: str | os.PathLike[str]) -> PeftAdapter:
    """The PEFT LoRA adapter in `folder`, every file checked before any model is involved:
    the config (`read_peft_config`), the tensors (`read_tensor_file`), tensor names PEFT writes
    for plain LoRA, and pairs of rank r whose update stays the size of a trained weight."""
    folder = Path(folder)
    config = read_peft_config(folder)
    if not (folder / TENSOR_FILE).exists() and not (folder / TENSOR_FILE).is_symlink():
        pickled = " (adapter_model.bin holds pickle, which adaptlab does not load)"
        extra = pickled if (folder / "adapter_model.bin").exists() else ""
        raise AdapterFileError(f"{folder}: no {TENSOR_FILE}{extra}")
    path = folder_file(folder, TENSOR_FILE)
    layers: dict[str, dict[str, torch.Tensor]] = {}
    head: dict[str, torch.Tensor] = {}
    for key, tensor in read_tensor_file(path, AdapterFileError).items():
        name = key.removeprefix(PREFIX)
        if not key.startswith(PREFIX) or not name:
            raise AdapterFileError(f"{path}: tensor {key!r} is not {PREFIX}*")
        part = next((p for p in "AB" if name.endswith(f".lora_{p}.weight")), None)
        if part is not None:
            layers.setdefault(name.removesuffix(f".lora_{part}.weight"), {})[part] = tensor
        elif any(piece.startswith("lora_") for piece in name.split(".")):
            raise AdapterFileError(
                f"{path}: tensor {key!r} is one PEFT writes only for what adaptlab's LoRA does "
                "not take (DoRA, LoRA of embeddings or biases, several adapters in one file)"
            )
        else:
            head[name] = tensor
    pairs = {}
    for site, pair in layers.items():
        problem = _pair_problem(site, pair, config)
        if problem:
            raise AdapterFileError(f"{path}: {problem}; the folder was edited: get it again")
        pairs[site] = (pair["A"], pair["B"])
    return PeftAdapter(folder=folder, config=config, pairs=pairs, head=head)


def _pair_problem(site: str, pair: Mapping[str, torch.Tensor], config: PeftConfig) -> str | None:
    """What is wrong with one layer's LoRA pair: a part missing, shapes that are not
    (r, in) and (out, r), or an update (lora_alpha / r) B A past what a trained weight holds."""
    for part in "AB":
        if part not in pair:
            return f"{site!r} has no lora_{part}"
    a, b, r = pair["A"], pair["B"], config.rank
    if a.dim() != 2 or b.dim() != 2 or a.shape[0] != r or b.shape[1] != r:
        return (
            f"the LoRA pair of {site!r} has shapes {tuple(a.shape)} and {tuple(b.shape)}, "
            f"where r = {r} needs ({r}, in) and (out, {r})"
        )
    product = b.float() @ a.float()
    peak = product.abs().amax().item() * config.scaling if product.numel() else 0.0
    if not peak <= MAX_MAGNITUDE:
        return (
            f"lora_alpha / r ({config.scaling:.3g}) times lora_B @ lora_A of {site!r} reaches "
            f"{peak:.3g}, past the {MAX_MAGNITUDE:,.0f} trained weights stay under (a forward "
            "pass through it overflows)"
        )
    return None

"""A loaded base model made ready for its run's scale, before any method is applied: its
frozen weights cast to the base dtype or quantised, the model on its device, activation
checkpointing on, and every forward pass of the model (training, dev, test, the analyses and
strategies that run it) under autocast at the run's precision. The scale stays known for the
model, so the one loop (`adaptlab.engine.loop`) computes its loss at that precision and
offloads when asked, whichever path trains it."""

from __future__ import annotations

import logging
from weakref import WeakKeyDictionary

import torch
from torch import nn

from adaptlab.backbone.discovery import find_backbone
from adaptlab.engine.checkpointing import enable_checkpointing
from adaptlab.engine.precision import DTYPES
from adaptlab.models.device import describe_device
from adaptlab.models.fingerprint import record_fingerprint
from adaptlab.parallel.ranks import is_main_process, process_count
from adaptlab.records.scale import Scale

log = logging.getLogger("adaptlab.device")
"""Says, once per run or sequence, where and how it trains (the CLI shows it on stderr)."""

_SCALES: WeakKeyDictionary[nn.Module, Scale] = WeakKeyDictionary()


def prepare_base(model: nn.Module, scale: Scale, device: torch.device) -> None:
    """Cast or quantise `model`'s weights, move it to `device`, turn on checkpointing; the
    model's fingerprint stays that of the weights as loaded."""
    if scale.base_dtype != "fp32":  # before quantising: de-quantised weights take this dtype
        record_fingerprint(model, exclude=find_backbone(model).head)
        model.to(DTYPES[scale.base_dtype])
    if scale.quantize is not None:
        from adaptlab.models.quantize import quantize_base

        quantize_base(model, scale.quantize, compute_dtype=DTYPES[scale.precision])
    model.to(device)
    if scale.gradient_checkpointing:
        enable_checkpointing(model)
    if scale.precision != "fp32":
        autocast = torch.autocast(device.type, dtype=DTYPES[scale.precision])
        model.forward = autocast(model.forward)  # type: ignore[method-assign]
    _SCALES[model] = scale


def announce_scale(model: nn.Module) -> None:
    """Say once, when its training starts, where and how `model` trains."""
    if not is_main_process():
        return
    device = next(model.parameters()).device
    processes = f", {process_count()} processes" if process_count() > 1 else ""
    log.info("device: %s, %s%s", describe_device(device), scale_of(model).describe(), processes)


def scale_of(model: nn.Module) -> Scale:
    """The scale `model` was prepared for (float32, nothing else, when it was not)."""
    return _SCALES.get(model, Scale())

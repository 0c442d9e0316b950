"""A loaded base model made ready for its run's scale, before any method is applied: its
frozen weights cast to the base dtype or quantised, the model on its device, activation
checkpointing on. Nothing about the scale is kept with the model, and its `forward` is left
alone: the run or sequence passes its scale to the one loop (`adaptlab.engine.loop`), which
trains and scores dev at its precision and offloads when asked; around every other pass over
the model (the test, analyses, a sequence's tests and strategies' passes) the run or sequence
enters that precision itself (`engine.precision.autocast_at`)."""

from __future__ import annotations

import logging

import torch
from torch import nn

from adaptlab.backbone.discovery import find_backbone
from adaptlab.engine.checkpointing import enable_checkpointing
from adaptlab.engine.gated_mlp import keep_less_in_mlps
from adaptlab.engine.precision import DTYPES
from adaptlab.models.device import describe_device
from adaptlab.models.fingerprint import record_fingerprint
from adaptlab.parallel.ranks import is_main_process, process_count
from adaptlab.records.scale import Scale

log = logging.getLogger("adaptlab.device")
"""Says, once per run or sequence, where and how it trains (the CLI shows it on stderr)."""

FLOAT32 = Scale()
"""The scale of a model no run prepared: float32, nothing cast, quantised or checkpointed."""


def prepare_base(model: nn.Module, scale: Scale, device: torch.device) -> None:
    """Cast or quantise `model`'s weights, move it to `device`, turn on checkpointing, and
    give its SwiGLU MLPs the forward that keeps less for the backward pass
    (`adaptlab.engine.gated_mlp`, the same values); the model's fingerprint stays that of the
    weights as loaded, and its own `forward` its class's."""
    if scale.base_dtype != "fp32":  # before quantising: de-quantised weights take this dtype
        record_fingerprint(model, exclude=find_backbone(model).head)
        model.to(DTYPES[scale.base_dtype])
    if scale.quantize is not None:
        from adaptlab.models.quantize import quantize_base

        quantize_base(model, scale.quantize, compute_dtype=DTYPES[scale.precision])
    model.to(device)
    keep_less_in_mlps(model)
    if scale.gradient_checkpointing:
        enable_checkpointing(model)


def announce_scale(model: nn.Module, scale: Scale) -> None:
    """Say once, when its training starts, where `model` trains and at which `scale`."""
    if not is_main_process():
        return
    device = next(model.parameters()).device
    processes = f", {process_count()} processes" if process_count() > 1 else ""
    log.info("device: %s, %s%s", describe_device(device), scale.describe(), processes)

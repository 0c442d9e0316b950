"""Adaptation methods: one module each, registered by name; named adapters and composition."""

# Import order is registration order: the order `list_methods` shows.
# isort: off
from adaptlab.methods import full, head, freeze, bitfit, lnfit  # noqa: F401
from adaptlab.methods import houlsby, pfeiffer, parallel, lora, fusion  # noqa: F401

# isort: on
from adaptlab.methods.adapt import (
    active,
    adapt,
    add_adapter,
    add_fusion,
    delete_adapter,
    disabled,
    fusion_weights,
    get_handle,
    list_adapters,
    merge,
    regularization_loss,
    remove,
    set_active,
    train_adapter,
    unmerge,
)
from adaptlab.methods.blocks import Fuse, Parallel, Stack
from adaptlab.methods.config import MethodConfig
from adaptlab.methods.fusion import FusionConfig
from adaptlab.methods.handle import AdaptHandle
from adaptlab.methods.persistence import load_adapter, read_manifest, save_adapter
from adaptlab.methods.registry import Method, get_method, list_methods, make_config

__all__ = [
    "AdaptHandle",
    "Fuse",
    "FusionConfig",
    "Method",
    "MethodConfig",
    "Parallel",
    "Stack",
    "active",
    "adapt",
    "add_adapter",
    "add_fusion",
    "delete_adapter",
    "disabled",
    "fusion_weights",
    "get_handle",
    "get_method",
    "list_adapters",
    "list_methods",
    "load_adapter",
    "make_config",
    "merge",
    "read_manifest",
    "regularization_loss",
    "remove",
    "save_adapter",
    "set_active",
    "train_adapter",
    "unmerge",
]

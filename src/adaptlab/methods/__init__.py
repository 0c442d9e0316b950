"""Adaptation methods: each one module of code and one of options (`configs`, where it is
registered by name); named adapters and composition."""

from typing import TYPE_CHECKING

from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
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
    from adaptlab.methods.adapter_loading import load_adapter
    from adaptlab.methods.blocks import Fuse, Parallel, Stack
    from adaptlab.methods.combine import combine_adapters
    from adaptlab.methods.config import MethodConfig
    from adaptlab.methods.configs.fusion import FusionConfig
    from adaptlab.methods.handle import AdaptHandle
    from adaptlab.methods.persistence import read_manifest, save_adapter
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
    "combine_adapters",
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

lazy_face(__name__)

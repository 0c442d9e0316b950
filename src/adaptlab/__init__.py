"""adaptlab: adapt pretrained transformers with few trainable parameters, compare, analyse."""

from typing import TYPE_CHECKING

from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
    from adaptlab.backbone import Backbone, BackboneOverrides, find_backbone
    from adaptlab.errors import AdaptlabError
    from adaptlab.integrations.hf import AdapterCheckpointCallback
    from adaptlab.methods import (
        AdaptHandle,
        Fuse,
        FusionConfig,
        MethodConfig,
        Parallel,
        Stack,
        active,
        adapt,
        add_adapter,
        add_fusion,
        delete_adapter,
        disabled,
        fusion_weights,
        get_handle,
        list_adapters,
        list_methods,
        load_adapter,
        make_config,
        merge,
        read_manifest,
        regularization_loss,
        remove,
        save_adapter,
        set_active,
        train_adapter,
        unmerge,
    )
    from adaptlab.version import __version__

__all__ = [
    "AdaptHandle",
    "AdapterCheckpointCallback",
    "AdaptlabError",
    "Backbone",
    "BackboneOverrides",
    "Fuse",
    "FusionConfig",
    "MethodConfig",
    "Parallel",
    "Stack",
    "__version__",
    "active",
    "adapt",
    "add_adapter",
    "add_fusion",
    "delete_adapter",
    "disabled",
    "find_backbone",
    "fusion_weights",
    "get_handle",
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

"""adaptlab: adapt pretrained transformers with few trainable parameters, compare, analyse."""

from adaptlab.backbone import Backbone, BackboneOverrides, find_backbone
from adaptlab.errors import AdaptlabError
from adaptlab.methods import (
    AdaptHandle,
    MethodConfig,
    adapt,
    disabled,
    get_handle,
    list_methods,
    load_adapter,
    make_config,
    merge,
    read_manifest,
    remove,
    save_adapter,
    unmerge,
)
from adaptlab.version import __version__

__all__ = [
    "AdaptHandle",
    "AdaptlabError",
    "Backbone",
    "BackboneOverrides",
    "MethodConfig",
    "__version__",
    "adapt",
    "disabled",
    "find_backbone",
    "get_handle",
    "list_methods",
    "load_adapter",
    "make_config",
    "merge",
    "read_manifest",
    "remove",
    "save_adapter",
    "unmerge",
]

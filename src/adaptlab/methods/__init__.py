"""Adaptation methods: one module each, registered by name, composable where it makes sense."""

# Import order is registration order: the order `list_methods` shows.
# isort: off
from adaptlab.methods import full, head, freeze, bitfit, lnfit  # noqa: F401
from adaptlab.methods import houlsby, pfeiffer, parallel, lora  # noqa: F401

# isort: on
from adaptlab.methods.adapt import adapt, disabled, get_handle, merge, remove, unmerge
from adaptlab.methods.config import MethodConfig
from adaptlab.methods.handle import AdaptHandle
from adaptlab.methods.persistence import load_adapter, read_manifest, save_adapter
from adaptlab.methods.registry import Method, get_method, list_methods, make_config

__all__ = [
    "AdaptHandle",
    "Method",
    "MethodConfig",
    "adapt",
    "disabled",
    "get_handle",
    "get_method",
    "list_methods",
    "load_adapter",
    "make_config",
    "merge",
    "read_manifest",
    "remove",
    "save_adapter",
    "unmerge",
]

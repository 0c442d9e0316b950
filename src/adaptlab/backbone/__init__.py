"""Find the parts of any Hugging Face transformer that adaptation methods attach to."""

from typing import TYPE_CHECKING

from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
    from adaptlab.backbone.discovery import find_backbone, is_norm
    from adaptlab.backbone.overrides import BackboneOverrides
    from adaptlab.backbone.parts import (
        INSERTED,
        Backbone,
        BlockParts,
        Part,
        get_module,
        is_inserted,
    )
    from adaptlab.backbone.roles import ROLES
    from adaptlab.backbone.rows import Rows

__all__ = [
    "INSERTED",
    "ROLES",
    "Rows",
    "Backbone",
    "BackboneOverrides",
    "BlockParts",
    "Part",
    "find_backbone",
    "get_module",
    "is_inserted",
    "is_norm",
]

lazy_face(__name__)

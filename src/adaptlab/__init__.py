"""adaptlab: adapt pretrained transformers with few trainable parameters, compare, analyse."""

from typing import TYPE_CHECKING

from adaptlab import methods  # the face alone, no torch: the top level offers all its names
from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
    from adaptlab.backbone import Backbone, BackboneOverrides, find_backbone
    from adaptlab.errors import AdaptlabError
    from adaptlab.integrations.hf import AdapterCheckpointCallback
    from adaptlab.methods import *  # noqa: F403
    from adaptlab.tasks.datasets import load_dataset, low_resource
    from adaptlab.threads import share_cpus
    from adaptlab.version import __version__

__all__ = [
    "AdapterCheckpointCallback",
    "AdaptlabError",
    "Backbone",
    "BackboneOverrides",
    "__version__",
    "find_backbone",
    "load_dataset",
    "low_resource",
    "share_cpus",
]
__all__ += methods.__all__

lazy_face(__name__)

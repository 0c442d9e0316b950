"""Data layer: built-in offline corpora, data files and hf: sources, low-resource subsets, encoding.

See docs/data.md for the sources, split rules and built-in split sizes.
"""

from typing import TYPE_CHECKING

from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
    from adaptlab.data.builtin import builtin_datasets
    from adaptlab.data.describe import describe
    from adaptlab.data.encoding import TextEncoder
    from adaptlab.data.loading import load_dataset
    from adaptlab.data.subsample import low_resource
    from adaptlab.data.types import Dataset, Example

__all__ = [
    "Dataset",
    "Example",
    "TextEncoder",
    "builtin_datasets",
    "describe",
    "load_dataset",
    "low_resource",
]

lazy_face(__name__)

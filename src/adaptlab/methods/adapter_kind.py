"""The class of model an adapter loads onto, read from the base class its manifest records
(`base_model.class`, as transformers named it).

One answer for the commands that ask: `combine` loads the base its sources were trained on as
this kind, and a run refuses to stack or fuse an adapter trained as another class of model
than its own (`adaptlab.engine.run_checks`). It needs no task: the methods know none, and the
class is what the adapter's modules were inserted into.
"""

from __future__ import annotations

from adaptlab.methods.manifest import Manifest
from adaptlab.models.loading import ModelKind, kind_of_class, loads_as


def adapter_kind(manifest: Manifest) -> ModelKind | None:
    """The kind that loads the adapter's base as it was trained, head included (a sequence
    classifier without label names: regression); None for a class of no kind adaptlab loads."""
    return kind_of_class(manifest.base_model.model_class, manifest.label_names is not None)


def trained_as(manifest: Manifest, kind: ModelKind) -> bool:
    """Whether a model of `kind` is of the class the adapter was trained as (single_label,
    multi_label and regression are one sequence classifier; a class several kinds load, such
    as BART's, is each of theirs)."""
    return loads_as(manifest.base_model.model_class, kind)

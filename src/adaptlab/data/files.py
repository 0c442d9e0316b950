"""Resolve a file or folder path into raw train/dev/test rows by file extension."""

from dataclasses import dataclass
from pathlib import Path

from adaptlab.data.readers import (
    TABLE_DELIMITERS,
    Columns,
    RawRow,
    read_bio,
    read_jsonl,
    read_table,
)
from adaptlab.errors import DataError

BIO_EXTENSIONS = (".txt", ".conll")
EXTENSIONS = (*TABLE_DELIMITERS, ".jsonl", *BIO_EXTENSIONS)


@dataclass(frozen=True)
class RowSplits:
    """Raw rows per split as the source gives them; a missing dev or test split is None."""

    train: list[RawRow]
    dev: list[RawRow] | None = None
    test: list[RawRow] | None = None


def read_file(path: Path, columns: Columns) -> list[RawRow]:
    """Read one data file, choosing the parser by its extension."""
    suffix = path.suffix.lower()
    if suffix in TABLE_DELIMITERS:
        return read_table(path, TABLE_DELIMITERS[suffix], columns)
    if suffix == ".jsonl":
        return read_jsonl(path, columns)
    if suffix in BIO_EXTENSIONS:
        return read_bio(path)
    raise DataError(
        f"unknown data file extension '{path.suffix}' for {path}; "
        f"use one of {', '.join(EXTENSIONS)}"
    )


def _split_file(folder: Path, split: str) -> Path | None:
    """The single `split.EXT` file in a folder, or None when there is none."""
    found = [folder / f"{split}{ext}" for ext in EXTENSIONS if (folder / f"{split}{ext}").is_file()]
    if len(found) > 1:
        names = ", ".join(path.name for path in found)
        raise DataError(f"{folder} has several {split} files ({names}); keep one")
    return found[0] if found else None


def read_folder(folder: Path, columns: Columns) -> RowSplits:
    """Read `train.*` and the optional `dev.*` and `test.*` files of a folder."""
    paths = {split: _split_file(folder, split) for split in ("train", "dev", "test")}
    train = paths["train"]
    if train is None:
        wanted = ", ".join(f"train{ext}" for ext in EXTENSIONS)
        raise DataError(f"{folder} has no training file; add one of {wanted}")
    dev, test = paths["dev"], paths["test"]
    return RowSplits(
        train=read_file(train, columns),
        dev=None if dev is None else read_file(dev, columns),
        test=None if test is None else read_file(test, columns),
    )


def read_path(path: Path, columns: Columns) -> RowSplits:
    """Read a single data file (all rows as train, to be split) or a split folder."""
    if path.is_dir():
        return read_folder(path, columns)
    if not path.exists():
        raise DataError(f"data file or folder not found: {path}; check the path")
    return RowSplits(train=read_file(path, columns))  # a pipe or device reads like a file

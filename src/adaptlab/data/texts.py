"""Unlabelled text for masked-language modelling: a text file, a data file's text column, or
the texts of a built-in corpus (its labels unused), in fixed train / dev / test splits.

- A `.txt` file holds one document a line (blank lines skipped).
- A CSV / TSV / JSONL file, folder of split files or `hf:NAME` source: its `text_column`.
- A built-in corpus: the texts of its own train, dev and test splits, so a language adapter
  trained on a corpus's training texts never sees its test texts.

A single file is split 80/10/10 by the same fixed rule as labelled data (seed 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from adaptlab.data.builtin import BUILTINS, load_builtin
from adaptlab.data.files import read_file
from adaptlab.data.generative import SplitCorpus
from adaptlab.data.generative_builtins import GENERATIVE_SHAPES
from adaptlab.data.hf import read_hf
from adaptlab.data.label_kind import LabelledTasks
from adaptlab.data.loading import not_labelled
from adaptlab.data.readers import Columns, decode_utf8, no_rows, read_bytes
from adaptlab.data.splits import carve_dev, three_way_split
from adaptlab.data.types import SPLIT_NAMES, Origin
from adaptlab.errors import ConfigError, DataError

TEXT_FILE = ".txt"

Documents = Sequence[tuple[str, Origin | None]]
"""Documents with where each came from."""


@dataclass(frozen=True)
class TextCorpus(SplitCorpus[str]):
    """Documents in fixed train / dev / test splits (see `SplitCorpus`)."""


def load_texts(
    source: str, tasks: LabelledTasks, *, text_column: str = "text", **options: object
) -> TextCorpus:
    """The documents of `source` (see the module docstring); label options are refused. A
    built-in is split as its labelled data are, read for its task among `tasks`."""
    unused = sorted(k for k, v in options.items() if k != "task" and v is not None)
    if unused:
        raise ConfigError(
            f"masked-language modelling reads only text; drop {unused[0].replace('_', '-')}"
        )
    if source in BUILTINS:
        if text_column != "text":
            raise ConfigError(
                f"built-in {source} reads its own columns; drop --text-column (text_column)"
            )
        dataset = load_builtin(source, tasks, None)
        splits = {
            split: [(_joined(example.text), example.origin) for example in dataset.splits[split]]
            for split in SPLIT_NAMES
        }
        return _corpus(source, f"the texts of built-in {source}, labels unused", splits)
    # The text column stands in as the label, so the readers ask for no other column.
    columns = Columns(text=text_column, label=text_column)
    if source.startswith("hf:"):
        spec = source.removeprefix("hf:")
        rows = read_hf(spec, columns)
        parts = {"train": rows.train, "dev": rows.dev, "test": rows.test}
        texts = {
            k: [(_joined(r.text), r.origin) for r in v] for k, v in parts.items() if v is not None
        }
        return _split(spec, f"Hugging Face dataset {spec}", texts)
    path = Path(source).expanduser()
    if path.is_dir():
        return _split(path.resolve().name, f"folder {path}", _folder_texts(path, columns))
    if not path.is_file() and source in GENERATIVE_SHAPES:
        raise not_labelled(source)
    if not path.is_file():
        raise DataError(
            f"unknown text source '{source}': no such file or folder, and not a built-in "
            f"({', '.join(BUILTINS)}); give a .txt, CSV/TSV/JSONL path, hf:NAME or a built-in"
        )
    return _split(path.stem, f"file {path}", {"train": _file_texts(path, columns)})


def _joined(text: str | tuple[str, ...]) -> str:
    """A document's text (a token task's words joined by spaces)."""
    return text if isinstance(text, str) else " ".join(text)


def _file_texts(path: Path, columns: Columns) -> Documents:
    """A .txt file's non-blank lines, or a data file's text column."""
    if path.suffix.lower() == TEXT_FILE:
        # Only newlines end a document: str.splitlines would also split at U+2028, U+0085,
        # form feeds and other separators that tweets and scraped text carry inside a line.
        lines = decode_utf8(read_bytes(path), path).split("\n")
        documents: Documents = [
            (line.strip(), Origin(path.name, number))
            for number, line in enumerate(lines, start=1)
            if line.strip()
        ]
        if not documents:
            raise no_rows(path)
        return documents
    return [(_joined(row.text), row.origin) for row in read_file(path, columns)]


def _folder_texts(folder: Path, columns: Columns) -> dict[str, Documents]:
    """The `train.*` and optional `dev.*` and `test.*` files of a folder."""
    texts: dict[str, Documents] = {}
    for split in SPLIT_NAMES:
        files = sorted(folder.glob(f"{split}.*"))
        if len(files) > 1:
            names = ", ".join(f.name for f in files)
            raise DataError(f"{folder} has several {split} files ({names}); keep one")
        if files:
            texts[split] = _file_texts(files[0], columns)
    if "train" not in texts:
        raise DataError(f"{folder} has no train file; add train.txt (one document a line)")
    return texts


def _split(name: str, source: str, texts: Mapping[str, Documents]) -> TextCorpus:
    """Fill in missing dev / test splits by the fixed rules labelled data follows (seed 0)."""
    train = texts["train"]
    if "dev" not in texts and "test" not in texts:
        at = three_way_split([None] * len(train))
        splits = {
            split: [train[i] for i in ids] for split, ids in zip(SPLIT_NAMES, at, strict=True)
        }
        return _corpus(name, f"{source}, one source split 80/10/10 (seed 0)", splits)
    if "test" not in texts:
        raise DataError(f"{name} has a dev split but no test split; add one (test.txt)")
    if "dev" not in texts:
        train_at, dev_at = carve_dev([None] * len(train))
        carved = {
            "train": [train[i] for i in train_at],
            "dev": [train[i] for i in dev_at],
            "test": texts["test"],
        }
        return _corpus(name, f"{source}, dev carved as 10% of train (seed 0)", carved)
    return _corpus(name, f"{source}, splits as given", texts)


def _corpus(name: str, source: str, splits: Mapping[str, Documents]) -> TextCorpus:
    for split in SPLIT_NAMES:
        if not splits[split]:
            raise DataError(f"the {split} split of {name} has no text; add more documents")
    sizes = ", ".join(f"{split} {len(splits[split])}" for split in SPLIT_NAMES)
    return TextCorpus(
        name=name,
        splits={split: tuple(text for text, _ in splits[split]) for split in SPLIT_NAMES},
        description=f"{source}: {sizes} documents.",
        origins={split: tuple(origin for _, origin in splits[split]) for split in SPLIT_NAMES},
    )

"""The `hf:NAME[:CONFIG]` source: a Hugging Face dataset through the optional `datasets` package.

Only the missing-package and load-failure errors are tested here (no network); the rest maps
ClassLabel ids to names and reuses the JSON-record path of the file readers.
"""

from collections.abc import Callable
from typing import Any

from adaptlab.data.files import RowSplits
from adaptlab.data.readers import Columns, RawRow, row_from_record
from adaptlab.data.types import Origin
from adaptlab.errors import DataError

HF_SPLITS = {"train": ("train",), "dev": ("validation", "dev"), "test": ("test",)}


def _label_namer(feature: Any) -> Callable[[Any], Any]:
    """Map ClassLabel ids (also inside lists) to their names; leave other labels as they are."""
    inner: Any = getattr(feature, "feature", None)
    classes: Any = inner if hasattr(inner, "int2str") else feature
    if not hasattr(classes, "int2str"):
        return lambda value: value

    def name(value: Any) -> Any:
        if isinstance(value, list):
            return [classes.int2str(item) for item in value]
        return classes.int2str(value)

    return name


def _rows(part: Any, columns: Columns, origin: str) -> list[RawRow]:
    """Raw rows of one loaded split, class ids turned into names."""
    to_name = _label_namer(part.features.get(columns.label))
    rows = []
    for number, record in enumerate(part, start=1):
        where = f"{origin} row {number}"
        if columns.label in record:
            try:
                record = {**record, columns.label: to_name(record[columns.label])}
            except ValueError:
                raise DataError(
                    f"{where} has label {record[columns.label]!r}, which is no class "
                    "(an unlabelled split?); pick a labelled dataset or split"
                ) from None
        row = row_from_record(record, columns, where, Origin(origin, number))
        if row is not None:
            rows.append(row)
    return rows


def read_hf(spec: str, columns: Columns) -> RowSplits:
    """Load `NAME[:CONFIG]` with `datasets` and read its train, validation/dev and test splits."""
    try:
        import datasets
    except ImportError:
        raise DataError(
            f"the source 'hf:{spec}' needs the datasets package; run: pip install datasets"
        ) from None
    name, _, config = spec.partition(":")
    try:
        loaded = datasets.load_dataset(name, config or None)
    except Exception as error:  # hub, network and config errors all come through here
        reason = (str(error).splitlines() or [type(error).__name__])[0]
        raise DataError(
            f"cannot load Hugging Face dataset '{spec}' ({reason}); "
            "check the name, the config and network access"
        ) from None
    parts: dict[str, list[RawRow] | None] = {}
    for split, candidates in HF_SPLITS.items():
        found = next((candidate for candidate in candidates if candidate in loaded), None)
        parts[split] = (
            None if found is None else _rows(loaded[found], columns, f"hf:{spec} {found}")
        )
    train = parts["train"]
    if not train:
        raise DataError(f"Hugging Face dataset '{spec}' has no labelled train split; pick another")
    return RowSplits(train=train, dev=parts["dev"], test=parts["test"])

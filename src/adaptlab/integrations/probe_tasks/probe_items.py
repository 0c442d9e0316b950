"""The loader of a probe task's items for lm-evaluation-harness: each task YAML names
`probe_items.load` as its `custom_dataset`, so its JSONL file is read from beside this module
wherever the package is installed, whatever the working directory."""

import json
from pathlib import Path

from datasets import Dataset, DatasetDict


def load(file: str, **_: object) -> DatasetDict:
    """The items of `file` (in this folder) as the test split; lm-eval also passes the task's
    metadata, which is not needed here."""
    lines = (Path(__file__).parent / file).read_text(encoding="utf-8").splitlines()
    return DatasetDict({"test": Dataset.from_list([json.loads(line) for line in lines])})

"""Low-resource subsets of a dataset, following He et al. (2021), §3.2 and Appendix A.1."""

from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction

from adaptlab.data.chronology import time_split
from adaptlab.data.label_kind import LabelKind
from adaptlab.data.splits import strata_order, systematic_pick
from adaptlab.data.types import SPLIT_NAMES, Dataset, Example
from adaptlab.errors import ConfigError, DataError


def low_resource(
    dataset: Dataset, task: LabelKind, train_size: int, seed: int, *, dev_size: int | None = None
) -> Dataset:
    """Sample `train_size` training examples and a dev set, stratified as `task` (the data
    set's) stratifies its labels; keep the test split.

    The dev set has `dev_size` examples (default: `train_size`), or all there are if fewer. It
    is drawn from the rest of the training split, or, for data split by time, from the dev
    split, so that dev stays later than train (the best epoch is picked on the later period).
    """
    # Protocol of "On the Effectiveness of Adapter-based Tuning for Pretrained Language Model
    # Adaptation" (He et al., ACL 2021), §3.2 and Appendix A.1: randomly sample the new training
    # set from the original training split, draw the validation set from the remaining training
    # examples, and evaluate on a held-out set that training never touches. Sampling here is
    # stratified by label (see `Task.stratum`) so small subsets keep the class balance.
    if train_size < 1:
        raise ConfigError(f"train_size must be at least 1, got {train_size}")
    wanted_dev = train_size if dev_size is None else dev_size
    if wanted_dev < 1:
        raise ConfigError(f"dev_size must be at least 1, got {dev_size}")
    train = dataset.splits["train"]
    by_time = dataset.time_split is not None
    if train_size > len(train):
        raise DataError(
            f"train_size {train_size} is larger than the training split of {dataset.name} "
            f"({len(train)} examples); pick at most {len(train)}"
        )
    if train_size == len(train) and not by_time:
        raise DataError(
            f"train_size {train_size} uses the whole training split of {dataset.name}, leaving "
            f"no examples for dev; pick at most {len(train) - 1}"
        )
    picked, rest = systematic_pick(
        _stream(dataset, task, train, seed), Fraction(train_size, len(train))
    )
    pool = dataset.splits["dev"] if by_time else train
    if by_time:
        rest = _stream(dataset, task, pool, seed)  # the dev period, not what training left
    dev_count = min(wanted_dev, len(rest))
    dev, _ = systematic_pick(rest, Fraction(dev_count, len(rest)))
    splits = {
        "train": tuple(train[index] for index in sorted(picked)),
        "dev": tuple(pool[index] for index in sorted(dev)),
        "test": dataset.splits["test"],
    }
    origin = "drawn from the dev period" if by_time else "drawn from the rest of train"
    note = (
        f" Low-resource subset (He et al. 2021, §3.2): {train_size} train examples sampled "
        f"with seed {seed}, {dev_count} dev examples {origin}, test kept."
    )
    cuts = dataset.time_split
    if cuts is not None:
        times = {split: [example.time for example in splits[split]] for split in SPLIT_NAMES}
        cuts = time_split(cuts.column, times)
        note += f" Periods of the subset: {cuts.spans()}."
    return replace(dataset, splits=splits, description=dataset.description + note, time_split=cuts)


def _stream(dataset: Dataset, task: LabelKind, examples: Sequence[Example], seed: int) -> list[int]:
    """Indices of `examples` grouped by stratum, each group shuffled with `seed`."""
    outside = dataset.label_names.index("O") if "O" in dataset.label_names else None
    keys = [task.stratum(example.label, outside) for example in examples]
    return [index for group in strata_order(keys, seed) for index in group]


def cut_to_sizes(
    dataset: Dataset, task: LabelKind, train_size: int | None, test_size: int | None, seed: int
) -> Dataset:
    """`dataset` (of `task`) cut to `train_size` training examples (as many for dev:
    `low_resource`) and its test split capped to `test_size` (stratified by label), both with
    `seed`; None keeps the split as it is."""
    if train_size is not None:
        dataset = low_resource(dataset, task, train_size, seed)
    if test_size is not None and test_size < len(dataset.splits["test"]):
        dataset = capped_test(dataset, task, test_size, seed)
    return dataset


def capped_test(dataset: Dataset, task: LabelKind, size: int, seed: int) -> Dataset:
    """`dataset` (of `task`) with `size` test examples, stratified by label, seeded."""
    test = dataset.splits["test"]
    keys = [task.stratum(example.label, None) for example in test]
    stream = [index for group in strata_order(keys, seed) for index in group]
    picked, _ = systematic_pick(stream, Fraction(size, len(stream)))
    splits = {**dataset.splits, "test": tuple(test[index] for index in sorted(picked))}
    note = f" Test capped to {size} examples (stratified, seed {seed})."
    return replace(dataset, splits=splits, description=dataset.description + note)

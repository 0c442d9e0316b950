"""Low-resource subsets of a dataset, following He et al. (2021), §3.2 and Appendix A.1."""

from dataclasses import replace
from fractions import Fraction

from adaptlab.data.splits import strata_order, stratum, systematic_pick
from adaptlab.data.types import Dataset
from adaptlab.errors import ConfigError, DataError


def low_resource(
    dataset: Dataset, train_size: int, seed: int, *, dev_size: int | None = None
) -> Dataset:
    """Sample `train_size` training examples and a dev set from the rest; keep the test split.

    The dev set has `dev_size` examples (default: `train_size`), or all that remain if fewer.
    """
    # Protocol of "On the Effectiveness of Adapter-based Tuning for Pretrained Language Model
    # Adaptation" (He et al., ACL 2021), §3.2 and Appendix A.1: randomly sample the new training
    # set from the original training split, draw the validation set from the remaining training
    # examples, and evaluate on a held-out set that training never touches. Sampling here is
    # stratified by label (see splits.stratum) so small subsets keep the class balance.
    if train_size < 1:
        raise ConfigError(f"train_size must be at least 1, got {train_size}")
    wanted_dev = train_size if dev_size is None else dev_size
    if wanted_dev < 1:
        raise ConfigError(f"dev_size must be at least 1, got {dev_size}")
    train = dataset.splits["train"]
    if train_size > len(train):
        raise DataError(
            f"train_size {train_size} is larger than the training split of {dataset.name} "
            f"({len(train)} examples); pick at most {len(train)}"
        )
    if train_size == len(train):
        raise DataError(
            f"train_size {train_size} uses the whole training split of {dataset.name}, leaving "
            f"no examples for dev; pick at most {len(train) - 1}"
        )
    outside = dataset.label_names.index("O") if "O" in dataset.label_names else None
    keys = [stratum(example.label, dataset.task, outside) for example in train]
    stream = [index for group in strata_order(keys, seed) for index in group]
    picked, rest = systematic_pick(stream, Fraction(train_size, len(stream)))
    dev_count = min(wanted_dev, len(rest))
    dev, _ = systematic_pick(rest, Fraction(dev_count, len(rest)))
    splits = {
        "train": tuple(train[index] for index in sorted(picked)),
        "dev": tuple(train[index] for index in sorted(dev)),
        "test": dataset.splits["test"],
    }
    note = (
        f" Low-resource subset (He et al. 2021, §3.2): {train_size} train examples sampled "
        f"with seed {seed}, {dev_count} dev examples drawn from the rest of train, test kept."
    )
    return replace(dataset, splits=splits, description=dataset.description + note)

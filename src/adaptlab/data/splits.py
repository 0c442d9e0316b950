"""Seeded, stratified index splits whose sizes are exact and documented."""

import random
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction
from typing import TypeVar

SPLIT_SEED = 0
DEV_SHARE = Fraction(1, 10)
TEST_SHARE = Fraction(1, 10)


Item = TypeVar("Item")
Where = TypeVar("Where")


def strata_order(keys: Sequence[Hashable], seed: int) -> list[list[int]]:
    """Indices grouped by key (groups in a fixed order), each group shuffled with `seed`."""
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for index, key in enumerate(keys):
        groups[key].append(index)
    rng = random.Random(seed)
    ordered = []
    for key in sorted(groups, key=repr):
        members = groups[key]
        rng.shuffle(members)
        ordered.append(members)
    return ordered


def systematic_pick(stream: Sequence[int], share: Fraction) -> tuple[list[int], list[int]]:
    """Pick every (1/share)-th item of a stratum-ordered stream: exactly floor(len * share)
    picks, spread evenly, so every stratum gets its share within one item."""
    picked: list[int] = []
    rest: list[int] = []
    for position, index in enumerate(stream):
        step = (position + 1) * share // 1 > position * share // 1
        (picked if step else rest).append(index)
    return picked, rest


def stratified_split(
    keys: Sequence[Hashable], seed: int, held: Fraction, test_share: Fraction
) -> tuple[list[int], list[int], list[int]]:
    """Split indices into (train, dev, test): hold out `held` of each stratum, beyond one
    example kept for training, and send `test_share` of the held-out part to test."""
    keep: list[int] = []
    stream: list[int] = []
    for members in strata_order(keys, seed):
        keep.append(members[0])
        stream.extend(members[1:])
    held_out, train = systematic_pick(stream, held)
    test, dev = systematic_pick(held_out, test_share)
    return sorted(keep + train), sorted(dev), sorted(test)


def three_way_split(keys: Sequence[Hashable]) -> tuple[list[int], list[int], list[int]]:
    """The fixed 80/10/10 stratified split used for single-file sources (seed 0)."""
    held = DEV_SHARE + TEST_SHARE
    return stratified_split(keys, SPLIT_SEED, held, TEST_SHARE / held)


def carve_dev(keys: Sequence[Hashable]) -> tuple[list[int], list[int]]:
    """The fixed stratified 10% dev set carved from a source's training split (seed 0)."""
    train, dev, _ = stratified_split(keys, SPLIT_SEED, DEV_SHARE, Fraction(0))
    return train, dev


def sample_train_and_dev(
    splits: Mapping[str, tuple[Item, ...]],
    origins: Mapping[str, tuple[Where, ...]] | None,
    train_size: int,
    seed: int,
) -> tuple[dict[str, tuple[Item, ...]], dict[str, tuple[Where, ...]] | None]:
    """`train_size` training items sampled with `seed` and as many dev items (or all there
    are), each kept in its split's order, the test split untouched; `origins` (item by item,
    as `splits`) follow."""
    sampled, followed = dict(splits), None if origins is None else dict(origins)
    for split in ("train", "dev"):
        items = splits[split]
        if not items:
            continue
        order = list(range(len(items)))
        random.Random(seed).shuffle(order)
        picked, _ = systematic_pick(order, Fraction(min(train_size, len(items)), len(items)))
        kept = sorted(picked)
        sampled[split] = tuple(items[i] for i in kept)
        if followed is not None:
            followed[split] = tuple(followed[split][i] for i in kept)
    return sampled, followed

"""The union of generative data sets that a multi-task run trains on: each data set read,
sampled, capped and encoded as a run on it alone would (its own columns and `train_on_prompt`),
each split of the union the data sets' splits one after another. The options that apply to the
union as a whole (`adaptlab.records.multi_task.UNION_OPTIONS`) agree, checked by the run's
spec, so its dev split is scored one way and the manifest keeps one chat template."""

from __future__ import annotations

from collections.abc import Sequence

from transformers import PreTrainedTokenizerBase

from adaptlab.data.types import SPLIT_NAMES, Origin
from adaptlab.records.spec import RunSpec
from adaptlab.runs.generative_data import EncodedData, encode_run_data
from adaptlab.runs.generative_evaluation import Answers, GenerativeSplit
from adaptlab.tasks.generative_facts import GenerativeFacts
from adaptlab.tasks.generative_settings import GenerativeSettings


def encoded_union(
    task: GenerativeFacts,
    spec: RunSpec,
    tokenizer: PreTrainedTokenizerBase,
    first: EncodedData,
) -> EncodedData:
    """`first` (the spec's `data`, encoded) and each data set of `spec.multi_task`, encoded
    with its own options, united."""
    others = [
        encode_run_data(
            task, spec, other.data, GenerativeSettings.of(other.data_options, task.name), tokenizer
        )
        for other in spec.multi_task
    ]
    return united([first, *others])


def united(parts: Sequence[EncodedData]) -> EncodedData:
    """One data set holding every split of `parts`, one after another."""
    splits = {split: _joined([part.splits[split] for part in parts]) for split in SPLIT_NAMES}
    origins: dict[str, tuple[Origin | None, ...]] | None = None
    if all(part.origins is not None for part in parts):
        origins = {
            split: tuple(o for part in parts for o in (part.origins or {})[split])
            for split in SPLIT_NAMES
        }
    return EncodedData(
        name=" + ".join(part.name for part in parts),
        description="Multi-task union. " + " ".join(f"{p.name}: {p.description}" for p in parts),
        splits=splits,
        dropped={split: sum(part.dropped[split] for part in parts) for split in SPLIT_NAMES},
        origins=origins,
        chat_template=parts[0].chat_template,
    )


def _joined(splits: Sequence[GenerativeSplit]) -> GenerativeSplit:
    """`splits` one after another (answers where every one has them: pairs and chats)."""
    encoded = [example for split in splits for example in split.encoded]
    given = [split.answers for split in splits if split.answers is not None]
    if len(given) != len(splits):
        return GenerativeSplit(encoded, None)
    answers = Answers(
        prompts=[prompt for answer in given for prompt in answer.prompts],
        texts=[text for answer in given for text in answer.texts],
        references=[reference for answer in given for reference in answer.references],
    )
    return GenerativeSplit(encoded, answers)

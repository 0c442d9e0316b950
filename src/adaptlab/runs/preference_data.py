"""A preference run's data read and encoded: the pairs of every split (sampled and capped as a
run samples and caps generative data), each answer with its prompt
(`adaptlab.data.preference_encoding`); per split, the chosen answers as `sft` scores them
(their perplexity, and answers generated to the prompts against them), and how many pairs were
left out because an answer did not fit."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from adaptlab.data.chat_render import ChatTemplate
from adaptlab.data.generative import capped_test, sample_corpus
from adaptlab.data.generative_encoding import EncodedExample
from adaptlab.data.preference import Judged, Preference, PreferenceCorpus, Prompt
from adaptlab.data.preference_encoding import EncodedJudged, EncodedPair, PreferenceEncoder
from adaptlab.data.preference_loading import load_preferences
from adaptlab.data.types import SPLIT_NAMES, Origin
from adaptlab.errors import DataError
from adaptlab.records.spec import RunSpec
from adaptlab.runs.generative_evaluation import Answers, GenerativeSplit
from adaptlab.tasks.preference import PreferenceTask
from adaptlab.tasks.preference_settings import PreferenceSettings
from adaptlab.tasks.registry import LABELLED

log = logging.getLogger("adaptlab.train")


@dataclass(frozen=True)
class PreferenceSplit:
    """A split's encoded pairs, and its chosen answers as a generative split to score."""

    pairs: Sequence[EncodedPair]
    chosen: GenerativeSplit


@dataclass(frozen=True)
class JudgedSplit:
    """A split's encoded answers judged desirable or not, and its desirable answers as a
    generative split to score."""

    answers: Sequence[EncodedJudged]
    desirable: GenerativeSplit


@dataclass(frozen=True)
class EncodedPreferences:
    """Every split encoded, what was left out of each, where its pairs came from, and the chat
    template conversations were rendered with (None: no conversation, or the tokenizer's)."""

    name: str
    description: str
    splits: Mapping[str, PreferenceSplit]
    dropped: Mapping[str, int]
    origins: Mapping[str, tuple[Origin | None, ...]] | None
    chat_template: str | None = None


@dataclass(frozen=True)
class EncodedJudgements:
    """Every split of unpaired answers encoded (as `EncodedPreferences`)."""

    name: str
    description: str
    splits: Mapping[str, JudgedSplit]
    dropped: Mapping[str, int]
    origins: Mapping[str, tuple[Origin | None, ...]] | None
    chat_template: str | None = None


@dataclass(frozen=True)
class Reading:
    """How data are read: in `max_length` tokens, training sampled (size, seed) and the test
    capped (size, seed) where given, chats rendered with `template` (the one an adapter's
    manifest keeps) unless the settings name a file (else the tokenizer's)."""

    max_length: int
    sample: tuple[int, int] | None = None
    test_cap: tuple[int, int] | None = None
    template: ChatTemplate | None = None

    @classmethod
    def of_run(cls, spec: RunSpec) -> Reading:
        """As `spec`'s run reads: its `max_length`, `train_size` and `test_size`, its seed."""
        seed = spec.train.seed
        return cls(
            spec.train.max_length,
            None if spec.train_size is None else (spec.train_size, seed),
            None if spec.test_size is None else (spec.test_size, seed),
        )


def encode_preferences(
    data: str,
    task: PreferenceTask,
    settings: PreferenceSettings,
    tokenizer: PreTrainedTokenizerBase,
    reading: Reading,
) -> EncodedPreferences:
    """`data` read as preference pairs and encoded as `reading` says."""
    corpus, encoder, template = _read(data, task, settings, tokenizer, reading)
    splits: dict[str, PreferenceSplit] = {}
    dropped: dict[str, int] = {}
    conversations = False
    for name in SPLIT_NAMES:
        kept: list[Preference] = []
        pairs: list[EncodedPair] = []
        for example in corpus.splits[name]:
            if not isinstance(example, Preference):
                raise DataError(f"{corpus.name} holds {type(example).__name__} rows, not pairs")
            conversations = conversations or not isinstance(example.prompt, str)
            pair = encoder.pair(example)
            if pair is not None:
                kept.append(example)
                pairs.append(pair)
        dropped[name] = _left_out(
            name, corpus.name, len(corpus.splits[name]), len(kept), reading.max_length
        )
        chosen = _answer_split(
            encoder,
            tokenizer,
            [e.prompt for e in kept],
            [e.chosen for e in kept],
            [pair.chosen for pair in pairs],
        )
        splits[name] = PreferenceSplit(pairs, chosen)
    chat = _template_used(conversations, template, tokenizer)
    return EncodedPreferences(
        corpus.name, corpus.description, splits, dropped, corpus.origins, chat
    )


def encode_judged(
    data: str,
    task: PreferenceTask,
    settings: PreferenceSettings,
    tokenizer: PreTrainedTokenizerBase,
    reading: Reading,
) -> EncodedJudgements:
    """`data` read as unpaired answers judged desirable or not and encoded as
    `encode_preferences` encodes pairs."""
    corpus, encoder, template = _read(data, task, settings, tokenizer, reading)
    splits: dict[str, JudgedSplit] = {}
    dropped: dict[str, int] = {}
    conversations = False
    for name in SPLIT_NAMES:
        kept: list[Judged] = []
        answers: list[EncodedJudged] = []
        for example in corpus.splits[name]:
            if not isinstance(example, Judged):
                raise DataError(f"{corpus.name} holds {type(example).__name__} rows, not answers")
            conversations = conversations or not isinstance(example.prompt, str)
            answer = encoder.judged(example)
            if answer is not None:
                kept.append(example)
                answers.append(answer)
        dropped[name] = _left_out(
            name, corpus.name, len(corpus.splits[name]), len(kept), reading.max_length
        )
        good = [(e, a.answer) for e, a in zip(kept, answers, strict=True) if e.desirable]
        if not good:
            raise DataError(f"the {name} split of {corpus.name} has no desirable answer")
        desirable = _answer_split(
            encoder,
            tokenizer,
            [e.prompt for e, _ in good],
            [e.completion for e, _ in good],
            [a for _, a in good],
        )
        splits[name] = JudgedSplit(answers, desirable)
    chat = _template_used(conversations, template, tokenizer)
    return EncodedJudgements(corpus.name, corpus.description, splits, dropped, corpus.origins, chat)


def read_corpus(data: str, shape: str, reading: Reading) -> PreferenceCorpus:
    """`data` read as `shape` data, training sampled and the test capped as `reading` says."""
    corpus = load_preferences(data, LABELLED, shape=shape)
    if reading.sample is not None:
        corpus = sample_corpus(corpus, *reading.sample)
    if reading.test_cap is not None:
        corpus = capped_test(corpus, *reading.test_cap)
    return corpus


def _read(
    data: str,
    task: PreferenceTask,
    settings: PreferenceSettings,
    tokenizer: PreTrainedTokenizerBase,
    reading: Reading,
) -> tuple[PreferenceCorpus, PreferenceEncoder, ChatTemplate | None]:
    """The corpus (sampled and capped), its encoder and the chat template it uses."""
    corpus = read_corpus(data, task.data_shape, reading)
    template = settings.generative.chat_template_or(reading.template)
    encoder = PreferenceEncoder(tokenizer, reading.max_length, chat_template=template)
    return corpus, encoder, template


def _left_out(split: str, corpus: str, read: int, kept: int, max_length: int) -> int:
    """How many of a split's `read` examples were left out (logged); none kept is an error."""
    if not kept:
        raise DataError(
            f"the {split} split of {corpus} has no example that fits; raise --max-length"
        )
    if read > kept:
        log.info(
            "%d %s examples left out: an answer does not fit %d tokens",
            *(read - kept, split, max_length),
        )
    return read - kept


def _template_used(
    conversations: bool, template: ChatTemplate | None, tokenizer: PreTrainedTokenizerBase
) -> str | None:
    """The chat template conversations were rendered with (None when there were none)."""
    if not conversations:
        return None
    return template.text if template is not None else tokenizer.chat_template


def _answer_split(
    encoder: PreferenceEncoder,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[Prompt],
    references: Sequence[str],
    encoded: Sequence[EncodedExample],
) -> GenerativeSplit:
    """Answers as `sft` scores them: their encoded tokens, and the prompts to answer with the
    references generation is scored against."""
    ids = [encoder.prompt_ids(p, r) for p, r in zip(prompts, references, strict=True)]
    answers = Answers(prompts=ids, texts=tokenizer.batch_decode(ids), references=list(references))
    return GenerativeSplit(list(encoded), answers)

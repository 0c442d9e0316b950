"""A generative task's data read and encoded: plain documents cut into windows, or prompt ->
completion pairs and chats encoded with the loss on their targets
(`adaptlab.data.generative_encoding`); per split, what generation is scored on, and how many
examples were left out because their answer did not fit."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from adaptlab.data.chat_render import ChatTemplate
from adaptlab.data.generative import GenerativeCorpus, capped_test, sample_corpus
from adaptlab.data.generative_encoding import GenerativeEncoder, Seq2SeqEncoder
from adaptlab.data.generative_loading import load_generative
from adaptlab.data.text_windows import windows
from adaptlab.data.texts import load_texts
from adaptlab.data.types import SPLIT_NAMES, Origin
from adaptlab.errors import DataError
from adaptlab.records.spec import RunSpec
from adaptlab.runs.generative_evaluation import Answers, GenerativeSplit
from adaptlab.tasks.generative_facts import GenerativeFacts
from adaptlab.tasks.generative_settings import GenerativeSettings
from adaptlab.tasks.registry import LABELLED

log = logging.getLogger("adaptlab.train")


@dataclass(frozen=True)
class EncodedData:
    """Every split encoded, what was left out of each, and where its examples came from."""

    name: str
    description: str
    splits: Mapping[str, GenerativeSplit]
    dropped: Mapping[str, int]
    origins: Mapping[str, tuple[Origin | None, ...]] | None
    chat_template: str | None = None


def encode_data(
    task: GenerativeFacts,
    data: str,
    settings: GenerativeSettings,
    tokenizer: PreTrainedTokenizerBase,
    max_length: int,
    *,
    sample: tuple[int, int] | None = None,
    test_cap: tuple[int, int] | None = None,
    template: ChatTemplate | None = None,
) -> EncodedData:
    """`data` read for `task` and every split encoded in at most `max_length` tokens; with
    `sample` (train size, seed), training sampled as a run samples it; with `test_cap` (test
    size, seed), pairs' and chats' test split capped as a run caps it. The chat template is
    `settings`' file's, else `template` (the one an adapter's manifest keeps), else the
    tokenizer's."""
    if task.data_shape is None:
        corpus = load_texts(data, LABELLED, text_column=settings.text_column)
        if sample is not None:
            corpus = sample_corpus(corpus, *sample, unit="documents")
        splits = {
            name: GenerativeSplit(windows(corpus.splits[name], tokenizer, max_length), None)
            for name in SPLIT_NAMES
        }
        _check_filled(splits, corpus.name)
        dropped = {name: 0 for name in SPLIT_NAMES}
        return EncodedData(corpus.name, corpus.description, splits, dropped, corpus.origins)
    texts = load_generative(
        data,
        LABELLED,
        shape=task.data_shape,
        prompt_column=settings.prompt_column,
        completion_column=settings.completion_column,
    )
    if sample is not None:
        texts = sample_corpus(texts, *sample)
    if test_cap is not None:
        texts = capped_test(texts, *test_cap)
    chosen = settings.chat_template_or(template)
    encoder = prompt_encoder(
        task,
        tokenizer,
        max_length,
        train_on_prompt=settings.train_on_prompt,
        chat_template=chosen,
    )
    used = None if chosen is None else chosen.text
    if task.data_shape == "messages":
        used = used or tokenizer.chat_template
    return _encode_corpus(texts, encoder, tokenizer, max_length, used)


def encode_run_data(
    task: GenerativeFacts,
    spec: RunSpec,
    data: str,
    settings: GenerativeSettings,
    tokenizer: PreTrainedTokenizerBase,
    *,
    template: ChatTemplate | None = None,
) -> EncodedData:
    """`data` encoded as `spec`'s run reads it: in its `max_length`, training sampled to its
    `train_size` and the test capped to its `test_size`, both with its seed."""
    seed = spec.train.seed
    return encode_data(
        task,
        data,
        settings,
        tokenizer,
        spec.train.max_length,
        sample=None if spec.train_size is None else (spec.train_size, seed),
        test_cap=None if spec.test_size is None else (spec.test_size, seed),
        template=template,
    )


def prompt_encoder(
    task: GenerativeFacts,
    tokenizer: PreTrainedTokenizerBase,
    max_length: int,
    *,
    train_on_prompt: bool = False,
    chat_template: ChatTemplate | None = None,
) -> GenerativeEncoder | Seq2SeqEncoder:
    """What encodes `task`'s examples: for an encoder-decoder, prompts in and completions as
    labels (`Seq2SeqEncoder`); for a decoder, one sequence with its targets marked."""
    if task.model_kind == "seq2seq_lm":
        return Seq2SeqEncoder(tokenizer, max_length)
    return GenerativeEncoder(
        tokenizer, max_length, train_on_prompt=train_on_prompt, chat_template=chat_template
    )


def _encode_corpus(
    corpus: GenerativeCorpus,
    encoder: GenerativeEncoder | Seq2SeqEncoder,
    tokenizer: PreTrainedTokenizerBase,
    max_length: int,
    chat_template: str | None,
) -> EncodedData:
    """Every split of `corpus` encoded, the examples whose answer does not fit counted."""
    splits: dict[str, GenerativeSplit] = {}
    dropped: dict[str, int] = {}
    for name in SPLIT_NAMES:
        kept, encoded = [], []
        for example in corpus.splits[name]:
            one = encoder.encode(example)
            if one is not None:
                kept.append(example)
                encoded.append(one)
        dropped[name] = len(corpus.splits[name]) - len(kept)
        if dropped[name]:
            log.info(
                "%d %s examples left out: their answer does not fit %d tokens",
                *(dropped[name], name, max_length),
            )
        prompts = [encoder.prompt_ids(e) for e in kept]
        answers = Answers(
            prompts=prompts,
            texts=tokenizer.batch_decode(prompts),
            references=[encoder.reference(e) for e in kept],
        )
        splits[name] = GenerativeSplit(encoded, answers)
    _check_filled(splits, corpus.name)
    return EncodedData(
        corpus.name, corpus.description, splits, dropped, corpus.origins, chat_template
    )


def _check_filled(splits: Mapping[str, GenerativeSplit], name: str) -> None:
    for split, part in splits.items():
        if not part.encoded:
            raise DataError(
                f"the {split} split of {name} has no example that fits; raise --max-length"
            )

"""What an analysis runs on: a trained model (adaptation on, base one switch away) and data.

A trained adapter or run folder is rebuilt with its base model loaded under the run's seed,
so the head starts where training started and `adapt` reproduces the inserted modules'
initial values: the handle then holds theta0 for every trained tensor (§5's landscape), and
`disabled()` gives the base model from the same object, full fine-tuning included.

A labelled run's data is read as labelled data (`TextEncoder` features). A decoder's run
(causal-lm, sft, chat) reads its data as it trained on it (`adaptlab.runs.generative_data`):
plain-text windows, or prompt -> completion pairs and chats with labels on their answers,
with the run's own data options, max length, sampled training split and chat template
(the adapter's manifest keeps the one it trained with). Its tokens to sample are those its loss
reads (`adaptlab.analysis.tokens`). An encoder-decoder's (seq2seq) is refused: its prompt and
answer go through two stacks of blocks, not one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.data.chat_render import kept_template
from adaptlab.data.encoding import TextEncoder
from adaptlab.data.loading import load_dataset
from adaptlab.data.subsample import low_resource
from adaptlab.data.types import Dataset
from adaptlab.engine.outputs import METRICS_FILE
from adaptlab.engine.restore import check_data_fits, check_split, load_trained
from adaptlab.engine.trained_run import Collator, DecoderCollator, EncoderCollator
from adaptlab.errors import ConfigError, DataError
from adaptlab.methods.manifest import RUN_ADAPTER_FOLDER, adapter_folder, read_manifest_file
from adaptlab.models.loading import LoadedModel
from adaptlab.records.config import TrainConfig
from adaptlab.records.result import read_result
from adaptlab.records.spec import RunSpec
from adaptlab.runs.generative_data import encode_data, encode_run_data
from adaptlab.tasks.generative import GenerativeTask
from adaptlab.tasks.generative_settings import GenerativeSettings
from adaptlab.tasks.registry import LABELLED, get_task, known_task


@dataclass
class Target:
    """An adapted model and the encoded examples to analyse it on: a labelled run's feature
    dicts, or a decoder's examples (ids and labels); `collator` batches them, `encoder` is a
    labelled run's (None for a decoder's)."""

    model: nn.Module
    tokenizer: PreTrainedTokenizerBase
    collator: Collator
    encoder: TextEncoder | None
    features: Sequence[Any]
    task: str
    label_names: tuple[str, ...]
    special_ids: frozenset[int]
    data: str  # how the examples were chosen, for the report

    def labelled(self, analysis: str) -> TextEncoder:
        """The labelled run's encoder, which `analysis` (reading a classifier's loss) needs;
        a decoder's run is refused in one line."""
        if self.encoder is None:
            raise ConfigError(
                f"analyze {analysis} reads a labelled run's loss over its classes; this run is "
                f"of task {self.task}: measure it with analyze rsa or cka"
            )
        return self.encoder


def load_target(
    path: str | os.PathLike[str],
    data: str,
    data_options: Mapping[str, Any] | None = None,
    *,
    split: str = "dev",
    device: str = "cpu",
    model: str | None = None,
) -> Target:
    """The trained model of `path` and the `split` of `data`.

    When `path` is a run folder trained on `data` with a train size, the split is the run's own
    low-resource split (same size and seed), so "dev" is the dev set the run was tuned on.
    A decoder's run (causal-lm, sft, chat) reads `data` as it trained on it (see the module
    docstring); an encoder-decoder's is refused before any model loads. `model` is the base
    model to load (see `adaptlab.engine.restore.load_trained`).
    """
    check_split(split)
    task = _generative_task(path)
    loaded, manifest = load_trained(path, device, model=model)
    if task is not None:
        return _generative_target(path, data, data_options, split, task, loaded, manifest)
    labels = tuple(manifest.get("label_names") or ())
    dataset = load_dataset(data, LABELLED, **dict(data_options or {}))
    dataset = check_data_fits(dataset, manifest, data)
    run = _run_record(adapter_folder(path), data)
    dataset, max_length = _as_in_run(dataset, run)
    encoder = TextEncoder(loaded.tokenizer, get_task(dataset.task), len(labels), max_length)
    examples = dataset.splits[split]
    return Target(
        model=loaded.model,
        tokenizer=loaded.tokenizer,
        collator=EncoderCollator(encoder),
        encoder=encoder,
        features=encoder.encode(examples),
        task=dataset.task,
        label_names=labels,
        special_ids=frozenset(loaded.tokenizer.all_special_ids),
        data=f"{dataset.name} {split} ({len(examples)} examples"
        + (", the run's own split)" if run else ")"),
    )


def _generative_task(path: str | os.PathLike[str]) -> GenerativeTask | None:
    """The generative task `path`'s manifest names (None: another task, or none, which
    `load_trained` refuses); an encoder-decoder's is refused before any model loads."""
    named = read_manifest_file(adapter_folder(path)).get("task")
    task = get_task(str(named)) if known_task(named) else None
    if not isinstance(task, GenerativeTask):
        return None
    if task.model_kind != "causal_lm":
        raise ConfigError(
            f"{path} is a {task.name} run: an encoder-decoder, whose prompts and answers go "
            "through two stacks of blocks; adaptlab analyze reads classifiers and decoders "
            "(analyze spectrum reads any run)"
        )
    return task


def _generative_target(
    path: str | os.PathLike[str],
    data: str,
    data_options: Mapping[str, Any] | None,
    split: str,
    task: GenerativeTask,
    loaded: LoadedModel,
    manifest: Mapping[str, Any],
) -> Target:
    """A decoder's run and the `split` of `data` read as the run read it: with the run's own
    options, max length and sampled split when `path` is a run folder trained on `data`, else
    with the default max length; `data_options` given override the run's."""
    run = _run_record(adapter_folder(path), data)
    options = {**(run.data_options if run is not None else {}), **(data_options or {})}
    named = options.get("task")
    if named is not None and named != task.name:
        raise DataError(f"{data} is read as {named} data, the adapter was trained for {task.name}")
    settings = replace(GenerativeSettings.of(options, task.name), chat_template=None)
    template = kept_template(manifest, path)  # the one it trained with
    tokenizer = loaded.tokenizer
    if run is not None:
        encoded = encode_run_data(task, run, data, settings, tokenizer, template=template)
    else:
        max_length = TrainConfig().max_length
        encoded = encode_data(task, data, settings, tokenizer, max_length, template=template)
    examples = encoded.splits[split].encoded
    return Target(
        model=loaded.model,
        tokenizer=tokenizer,
        collator=DecoderCollator(tokenizer.pad_token_id),
        encoder=None,
        features=examples,
        task=task.name,
        label_names=(),
        special_ids=frozenset(tokenizer.all_special_ids),
        data=f"{encoded.name} {split} ({len(examples)} examples"
        + (", the run's own split)" if run else ")"),
    )


def _run_record(folder: Path, data: str) -> RunSpec | None:
    """The spec of the run whose adapter folder is `folder`, when it trained on `data`."""
    record = (folder.parent if folder.name == RUN_ADAPTER_FOLDER else folder) / METRICS_FILE
    if not record.is_file():
        return None
    spec = read_result(record).spec
    return spec if _same_data(spec.data, data) else None


def _same_data(recorded: str, given: str) -> bool:
    """Whether two data arguments name the same source (`./x.csv` and `x.csv` do)."""
    if recorded == given:
        return True
    a, b = Path(recorded).expanduser(), Path(given).expanduser()
    return a.exists() and b.exists() and a.resolve() == b.resolve()


def _as_in_run(dataset: Dataset, run: RunSpec | None) -> tuple[Dataset, int]:
    """The dataset cut as the run cut it, and the run's max length (the default without one)."""
    if run is None:
        return dataset, TrainConfig().max_length
    if run.train_size is not None:
        task = get_task(dataset.task)
        dataset = low_resource(dataset, task, run.train_size, run.train.seed)
    return dataset, run.train.max_length

"""Load a pretrained transformer with the head a task needs, from a built-in, folder or hub name.

What loads is checked: weights whose shapes do not fit config.json are refused (transformers
would quietly draw them at random), except a task head sized anew for the labels, and so are
weights holding NaN or infinities.
"""

import math
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Literal, get_args

import torch
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
    MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES,
)

from adaptlab.errors import ConfigError, ModelNotFoundError
from adaptlab.models.quiet import quiet_transformers
from adaptlab.models.resolve import ModelSource, load_errors, resolve_model
from adaptlab.models.tensor_checks import value_problem

ModelKind = Literal[
    "single_label",
    "multi_label",
    "token",
    "regression",
    "masked_lm",
    "causal_lm",
    "seq2seq_lm",
    "base",
]
MODEL_KINDS: tuple[str, ...] = get_args(ModelKind)

_AUTO_CLASSES: dict[str, Any] = {
    "single_label": AutoModelForSequenceClassification,
    "multi_label": AutoModelForSequenceClassification,
    "regression": AutoModelForSequenceClassification,
    "token": AutoModelForTokenClassification,
    "masked_lm": AutoModelForMaskedLM,
    "causal_lm": AutoModelForCausalLM,
    "seq2seq_lm": AutoModelForSeq2SeqLM,
    "base": AutoModel,
}
_OF_THAT_KIND = "pick a model of that kind"
_LM_HEADS = {
    "masked_lm": ("masked-LM", MODEL_FOR_MASKED_LM_MAPPING_NAMES, _OF_THAT_KIND),
    "causal_lm": ("causal-LM", MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, _OF_THAT_KIND),
    "seq2seq_lm": (
        "sequence-to-sequence LM",
        MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
        "pick an encoder-decoder such as T5 or BART",
    ),
}
"""The kinds whose head a model type must have in transformers: its name, the model types
that have it, and what to do instead."""
_PROBLEM_TYPES = {
    "single_label": "single_label_classification",
    "multi_label": "multi_label_classification",
    "regression": "regression",
}
_LABELLED_KINDS = ("single_label", "multi_label", "token", "regression")
MAX_LABELS = 1_000_000
"""More output classes than this is a mistake (a head of 10**12 rows would never allocate)."""


_CLASSES: dict[str, dict[str, str]] = {
    "single_label": MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
    "multi_label": MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
    "regression": MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
    "token": MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES,
    "masked_lm": MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    "causal_lm": MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    "seq2seq_lm": MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
}
"""The transformers class each kind with a head loads, by model type."""
_KINDS_OF_CLASSES: tuple[ModelKind, ...] = (
    "single_label",
    "token",
    "masked_lm",
    "causal_lm",
    "seq2seq_lm",
)
"""The kinds `kind_of_class` tries, in order (a class several load, such as BART's, takes the
first: the class is the same whichever loads it)."""


def loads_as(model_class: str, kind: ModelKind) -> bool:
    """Whether a model of `kind` is a `model_class` for some model type (the transformers class
    an adapter's manifest records of its base): single_label, multi_label and regression load
    one sequence classifier; False for `base`, which has no head to tell."""
    return model_class in _CLASSES.get(kind, {}).values()


def kind_of_class(model_class: str, named_labels: bool) -> ModelKind | None:
    """The kind that loads a model of transformers class `model_class` (as an adapter's
    manifest records its base), None for a class of no kind here. A sequence classifier
    without `named_labels` is a regression head (one output); one with them loads as
    single_label, of one class with multi_label (`loads_as`)."""
    for kind in _KINDS_OF_CLASSES:
        if loads_as(model_class, kind):
            return "regression" if kind == "single_label" and not named_labels else kind
    return None


@dataclass
class LoadedModel:
    """A model in float32 with its tokenizer, and the name the user gave for it."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    model_id: str


def load_model(
    name_or_path: str,
    kind: ModelKind = "base",
    *,
    label_names: Sequence[str] | None = None,
    num_labels: int | None = None,
    seed: int | None = None,
) -> LoadedModel:
    """Load a model for `kind`; a new head is sized by the labels and reproducible given `seed`."""
    head = head_config(kind, label_names, num_labels)
    source = resolve_model(name_or_path)
    tokenizer = _tokenizer(name_or_path, source)
    with quiet_transformers(), load_errors(name_or_path, source):
        config = AutoConfig.from_pretrained(
            source.location, local_files_only=source.local_files_only, **head
        )
        if kind in _LM_HEADS and config.model_type not in _LM_HEADS[kind][1]:
            lm_head, _, advice = _LM_HEADS[kind]
            architecture = (config.architectures or [config.model_type])[0]
            raise ConfigError(
                f"{name_or_path} ({config.model_type}) has no {lm_head} head in transformers: it "
                f"is a {architecture}; {advice}"
            )
        if getattr(config, "pad_token_id", None) is None:
            config.pad_token_id = tokenizer.pad_token_id
        rng = torch.random.fork_rng(devices=[]) if seed is not None else nullcontext()
        with rng:
            if seed is not None:
                torch.manual_seed(seed)
            model, info = _AUTO_CLASSES[kind].from_pretrained(
                source.location,
                config=config,
                dtype=torch.float32,
                local_files_only=source.local_files_only,
                ignore_mismatched_sizes=True,
                output_loading_info=True,
            )
    _check_weights(name_or_path, model, info["mismatched_keys"], new_head="num_labels" in head)
    return LoadedModel(model=model, tokenizer=tokenizer, model_id=name_or_path)


def _check_weights(
    name: str, model: PreTrainedModel, mismatched: Iterable[Any], new_head: bool
) -> None:
    """Refuse weights that do not fit the config (but a head sized anew for the labels, when
    `new_head`) and weights that hold NaN or infinities."""
    body = f"{model.base_model_prefix}."
    for key, found, needed in sorted(mismatched):
        if not new_head or model.base_model is model or key.startswith(body):
            raise ModelNotFoundError(
                f"cannot load model {name!r}: its weights do not fit its config.json (tensor "
                f"{key!r} is {tuple(found)} in the weights, {tuple(needed)} in the model); use "
                "the config.json saved with these weights"
            )
    for key, parameter in model.named_parameters():
        problem = value_problem(parameter, limit=math.inf)
        if problem is not None:
            raise ModelNotFoundError(
                f"cannot load model {name!r}: its weights are damaged (tensor {key!r} "
                f"{problem}); replace them with an intact copy"
            )


def load_tokenizer(name_or_path: str) -> PreTrainedTokenizerBase:
    """Load the tokenizer of a built-in name, folder or hub name, with a pad token set."""
    return _tokenizer(name_or_path, resolve_model(name_or_path))


def head_config(
    kind: str, label_names: Sequence[str] | None, num_labels: int | None
) -> dict[str, Any]:
    """The config overrides (label count and names, problem type) that a `kind` head needs."""
    if kind not in MODEL_KINDS:
        raise ConfigError(f"unknown model kind {kind!r}; choose one of {', '.join(MODEL_KINDS)}")
    if kind not in _LABELLED_KINDS:
        if label_names is not None or num_labels is not None:
            raise ConfigError(f"model kind {kind!r} has no label head: drop label_names/num_labels")
        return {}
    head: dict[str, Any] = {}
    if kind in _PROBLEM_TYPES:
        head["problem_type"] = _PROBLEM_TYPES[kind]
    if label_names is not None:
        names = list(label_names)
        if len(set(names)) != len(names):
            raise ConfigError(f"label names must be unique, got {names}")
        if num_labels is not None and num_labels != len(names):
            raise ConfigError(f"num_labels={num_labels} but {len(names)} label names: {names}")
        head["id2label"] = dict(enumerate(names))
        head["label2id"] = {name: i for i, name in enumerate(names)}
        num_labels = len(names)
    if kind == "regression" and num_labels not in (None, 1):
        raise ConfigError(f"a regression head has 1 output, not {num_labels}")
    if kind == "regression":
        num_labels = 1
    minimum = 2 if kind == "single_label" else 1
    if num_labels is not None and not minimum <= num_labels <= MAX_LABELS:
        raise ConfigError(
            f"a {kind} head needs {minimum} to {MAX_LABELS:,} labels, got {num_labels:,}"
        )
    if num_labels is not None:
        head["num_labels"] = num_labels
    return head


def _tokenizer(name_or_path: str, source: ModelSource) -> PreTrainedTokenizerBase:
    """Load a tokenizer and give it a pad token (its eos) if it has none, so batches can pad."""
    with quiet_transformers(), load_errors(name_or_path, source):
        tokenizer = AutoTokenizer.from_pretrained(
            source.location, local_files_only=source.local_files_only
        )
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer

"""The head kind a recorded base class loads as (`adaptlab.models.loading.kind_of_class`): how
combining adapters loads the base its sources were trained on, the methods knowing no tasks."""

from __future__ import annotations

import pytest

from adaptlab.models.loading import kind_of_class, same_model_class
from adaptlab.tasks.registry import TASKS

HEADS = {
    "single_label": "BertForSequenceClassification",
    "multi_label": "BertForSequenceClassification",
    "regression": "BertForSequenceClassification",
    "token": "BertForTokenClassification",
    "masked_lm": "BertForMaskedLM",
    "causal_lm": "LlamaForCausalLM",
    "seq2seq_lm": "T5ForConditionalGeneration",
}
"""A class each kind of head loads as."""


@pytest.mark.parametrize("task", [task.name for task in TASKS])
def test_every_task_s_head_class_loads_as_its_own_kind(task: str) -> None:
    found = TASKS.get(task)
    kind = kind_of_class(HEADS[found.model_kind], found.named_labels)
    assert kind is not None and same_model_class(kind, found.model_kind)
    assert (kind == "regression") == (found.model_kind == "regression")  # one output, unnamed


def test_classes_named_otherwise_and_bare_bases() -> None:
    assert kind_of_class("GPT2LMHeadModel", False) == "causal_lm"
    assert kind_of_class("BertModel", False) is None

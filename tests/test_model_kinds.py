"""The head kind a recorded base class loads as (`adaptlab.models.loading.kind_of_class`), and
whether a kind loads that class (`loads_as`): how combining adapters loads the base its sources
were trained on, and how a run checks the adapters it stacks, the methods knowing no tasks."""

from __future__ import annotations

import pytest

from adaptlab.models.loading import kind_of_class, loads_as
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
    head = HEADS[found.model_kind]
    kind = kind_of_class(head, found.named_labels)
    assert kind is not None and loads_as(head, kind) and loads_as(head, found.model_kind)
    assert (kind == "regression") == (found.model_kind == "regression")  # one output, unnamed


def test_classes_named_otherwise_and_bare_bases() -> None:
    assert kind_of_class("GPT2LMHeadModel", False) == "causal_lm"
    assert kind_of_class("BertModel", False) is None


def test_a_class_two_kinds_load_is_each_of_theirs_and_a_kind_loads_no_other() -> None:
    bart = "BartForConditionalGeneration"  # transformers' masked-LM and seq2seq class of BART
    assert kind_of_class(bart, False) == "masked_lm"
    assert loads_as(bart, "seq2seq_lm") and loads_as(bart, "masked_lm")
    assert not loads_as(bart, "causal_lm")
    assert loads_as("BertForSequenceClassification", "regression")
    assert not loads_as("BertForSequenceClassification", "token")
    assert not loads_as("BertModel", "base")  # a bare base has no head to tell its kind by

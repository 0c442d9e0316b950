"""Tiny random models of every family the coverage matrix checks, built from configs.

Each family is a `config.model_type` with options small enough for a model of a few tens of
thousands of parameters; a variant of a family with another layout of its fused layer (Falcon's
per-head and grouped key-value layouts, GPT-BigCode's per-head one) has a name of its own.
Decoders are built as causal LMs, encoders as sequence classifiers, encoder-decoders as
sequence-to-sequence LMs: the head each kind is mostly adapted with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import transformers as T
from torch import nn

VOCAB = 128
DECODER, ENCODER, ENCODER_DECODER = "decoder", "encoder", "encoder-decoder"

_STANDARD = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
_GPT2 = dict(n_embd=32, n_layer=2, n_head=4, n_inner=64)
_T5 = dict(d_model=32, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4, d_kv=8)
_BART = dict(
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    max_position_embeddings=64,
)
_GQA = dict(_STANDARD, num_key_value_heads=2)
_LATENT = dict(
    _STANDARD,
    q_lora_rank=16,
    kv_lora_rank=16,
    qk_nope_head_dim=8,
    qk_rope_head_dim=4,
    v_head_dim=8,
    num_key_value_heads=4,
)
_LATENT_MOE = dict(
    _LATENT,
    n_routed_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=32,
    first_k_dense_replace=1,
    n_shared_experts=1,
)
_MOE = dict(_GQA, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)


@dataclass(frozen=True)
class Family:
    """A tiny model of one family: its model type, kind and config options."""

    name: str
    model_type: str
    kind: str
    options: dict[str, Any] = field(default_factory=dict)

    def config(self) -> T.PretrainedConfig:
        """The tiny config, its special token ids inside the small vocabulary."""
        config = T.AutoConfig.for_model(self.model_type, vocab_size=VOCAB, **self.options)
        for attribute in (
            "pad_token_id",
            "bos_token_id",
            "eos_token_id",
            "sep_token_id",
            "decoder_start_token_id",
            "cls_token_id",
        ):
            value = getattr(config, attribute, None)
            if isinstance(value, int) and value >= 3:
                setattr(config, attribute, 2 if attribute == "eos_token_id" else 0)
        if self.kind == ENCODER:
            config.num_labels = 3
        return config

    def model(self, seed: int = 0) -> nn.Module:
        """The tiny model, in eval mode, with weights drawn from `seed`."""
        torch.manual_seed(seed)
        auto = {
            DECODER: T.AutoModelForCausalLM,
            ENCODER: T.AutoModelForSequenceClassification,
            ENCODER_DECODER: T.AutoModelForSeq2SeqLM,
        }[self.kind]
        model = auto.from_config(self.config(), attn_implementation="eager")
        return model.eval()

    def inputs(self, seed: int = 1, batch: int = 2, length: int = 7) -> dict[str, torch.Tensor]:
        """Token ids past the special ones, with a full attention mask (and decoder ids for an
        encoder-decoder)."""
        generator = torch.Generator().manual_seed(seed)
        ids = torch.randint(3, VOCAB, (batch, length), generator=generator)
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if self.kind == ENCODER_DECODER:
            inputs["decoder_input_ids"] = torch.randint(3, VOCAB, (batch, 5), generator=generator)
        return inputs

    def loss(self, model: nn.Module, seed: int = 2) -> torch.Tensor:
        """A training loss on random targets for the family's head."""
        inputs = self.inputs(seed)
        if self.kind == ENCODER:
            labels = torch.arange(inputs["input_ids"].shape[0]) % 3
        elif self.kind == DECODER:
            labels = inputs["input_ids"]
        else:
            labels = inputs["decoder_input_ids"]
        return model(**inputs, labels=labels).loss  # type: ignore[no-any-return]


def _families() -> tuple[Family, ...]:
    d, e, ed = DECODER, ENCODER, ENCODER_DECODER
    return (
        Family("gpt2", "gpt2", d, _GPT2),
        Family("openai-gpt", "openai-gpt", d, dict(n_embd=32, n_layer=2, n_head=4)),
        Family("gpt_bigcode", "gpt_bigcode", d, _GPT2),
        Family("gpt_bigcode-per-head", "gpt_bigcode", d, dict(_GPT2, multi_query=False)),
        Family(
            "gpt_neo",
            "gpt_neo",
            d,
            dict(
                hidden_size=32,
                num_layers=2,
                num_heads=4,
                intermediate_size=64,
                attention_types=[[["global", "local"], 1]],
                window_size=16,
            ),
        ),
        Family("gptj", "gptj", d, dict(_GPT2, rotary_dim=4)),
        Family("gpt_neox", "gpt_neox", d, _STANDARD),
        Family("codegen", "codegen", d, dict(_GPT2, rotary_dim=4)),
        Family(
            "opt",
            "opt",
            d,
            dict(
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=4,
                ffn_dim=64,
                word_embed_proj_dim=32,
                max_position_embeddings=64,
            ),
        ),
        Family("bloom", "bloom", d, dict(hidden_size=32, n_layer=2, n_head=4)),
        Family("falcon", "falcon", d, dict(_STANDARD, alibi=False)),
        Family("falcon-per-head", "falcon", d, dict(_STANDARD, multi_query=False)),
        Family(
            "falcon-grouped",
            "falcon",
            d,
            dict(_STANDARD, new_decoder_architecture=True, num_kv_heads=2),
        ),
        Family("mpt", "mpt", d, dict(d_model=32, n_layers=2, n_heads=4, expansion_ratio=2)),
        Family("llama", "llama", d, _GQA),
        Family("mistral", "mistral", d, _GQA),
        Family("mixtral", "mixtral", d, dict(_GQA, num_local_experts=4, num_experts_per_tok=2)),
        Family("qwen2", "qwen2", d, _GQA),
        Family("qwen2_moe", "qwen2_moe", d, dict(_MOE, shared_expert_intermediate_size=64)),
        Family("qwen3", "qwen3", d, dict(_GQA, head_dim=16)),
        Family("deepseek_v3", "deepseek_v3", d, dict(_LATENT_MOE, n_group=1, topk_group=1)),
        Family("deepseek_v2", "deepseek_v2", d, _LATENT_MOE),
        Family("minicpm3", "minicpm3", d, _LATENT),
        Family("qwen3_moe", "qwen3_moe", d, _MOE),
        Family("olmoe", "olmoe", d, dict(_GQA, num_experts=4, num_experts_per_tok=2)),
        Family("gemma", "gemma", d, dict(_GQA, head_dim=16)),
        Family("gemma2", "gemma2", d, dict(_GQA, head_dim=16, sliding_window=16)),
        Family("gemma3_text", "gemma3_text", d, dict(_GQA, head_dim=16, sliding_window=16)),
        Family("phi", "phi", d, _STANDARD),
        Family("phi3", "phi3", d, _GQA),
        Family("stablelm", "stablelm", d, _GQA),
        Family("starcoder2", "starcoder2", d, _GQA),
        Family("olmo", "olmo", d, _STANDARD),
        Family("olmo2", "olmo2", d, _GQA),
        Family("cohere", "cohere", d, _GQA),
        Family("granite", "granite", d, _GQA),
        Family("glm", "glm", d, dict(_GQA, head_dim=8)),
        Family("smollm3", "smollm3", d, _GQA),
        Family("persimmon", "persimmon", d, _STANDARD),
        Family("biogpt", "biogpt", d, _STANDARD),
        Family("xglm", "xglm", d, dict(d_model=32, num_layers=2, attention_heads=4, ffn_dim=64)),
        Family("bert", "bert", e, _STANDARD),
        Family("roberta", "roberta", e, _STANDARD),
        Family("xlm-roberta", "xlm-roberta", e, _STANDARD),
        Family("camembert", "camembert", e, _STANDARD),
        Family("deberta", "deberta", e, dict(_STANDARD, relative_attention=True)),
        Family(
            "deberta-v2",
            "deberta-v2",
            e,
            dict(
                _STANDARD,
                relative_attention=True,
                pos_att_type=["p2c", "c2p"],
                position_buckets=32,
                norm_rel_ebd="layer_norm",
                share_att_key=True,
            ),
        ),
        Family("distilbert", "distilbert", e, dict(dim=32, n_layers=2, n_heads=4, hidden_dim=64)),
        Family("electra", "electra", e, dict(_STANDARD, embedding_size=16)),
        Family("albert", "albert", e, dict(_STANDARD, embedding_size=16)),
        Family("mpnet", "mpnet", e, _STANDARD),
        Family(
            "modernbert",
            "modernbert",
            e,
            dict(_STANDARD, global_attn_every_n_layers=2, local_attention=16),
        ),
        Family("ernie", "ernie", e, _STANDARD),
        Family("roformer", "roformer", e, dict(_STANDARD, embedding_size=32)),
        Family("t5", "t5", ed, _T5),
        Family("mt5", "mt5", ed, _T5),
        Family("umt5", "umt5", ed, _T5),
        Family("bart", "bart", ed, _BART),
        Family("mbart", "mbart", ed, _BART),
        Family("pegasus", "pegasus", ed, _BART),
        Family("marian", "marian", ed, _BART),
        Family("m2m_100", "m2m_100", ed, _BART),
        Family("blenderbot", "blenderbot", ed, _BART),
        Family("plbart", "plbart", ed, _BART),
    )


FAMILIES: tuple[Family, ...] = _families()
BY_NAME = {family.name: family for family in FAMILIES}

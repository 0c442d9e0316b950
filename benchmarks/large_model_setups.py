"""The six LoRA training setups of `large_model_memory.py`, each on a random Llama-shaped model.

Every setup takes a fresh fp32 `LlamaForCausalLM`, adapts it (LoRA r = 16, alpha 32, no
dropout, on q, k, v, o, gate, up and down of every transformer layer) and returns the step's
forward + loss + backward as one function of the token ids. The optimizer step is the caller's.
adaptlab's pieces are imported where a setup is built, so this module imports without them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from tensor_bytes import LiveBytes
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

SHAPES: dict[str, dict[str, Any]] = {
    "tinyllama-1.1b": dict(
        num_hidden_layers=22,
        hidden_size=2048,
        intermediate_size=5632,
        num_attention_heads=32,
        num_key_value_heads=4,
        vocab_size=32000,
        tie_word_embeddings=False,
    ),
    "smollm2-135m": dict(
        num_hidden_layers=30,
        hidden_size=576,
        intermediate_size=1536,
        num_attention_heads=9,
        num_key_value_heads=3,
        vocab_size=49152,
        tie_word_embeddings=True,
        rope_theta=100000.0,
    ),
    "tiny": dict(  # for a quick look and the test: widths that NF4 takes on the CPU
        num_hidden_layers=2,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=512,
        tie_word_embeddings=False,
    ),
}
REAL_SHAPES = ("tinyllama-1.1b", "smollm2-135m")
"""The shapes of real models (`tiny` is for quick looks)."""
RANK, ALPHA = 16, 32
PEFT_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
ADAPTLAB_TARGETS = ["query", "key", "value", "attention_out", "ffn_in", "ffn_out"]
"""adaptlab's roles for the same seven layers (ffn_in is gate and up of a gated FFN)."""
CHECKPOINT_KWARGS = {"use_reentrant": False}

Step = Callable[[torch.Tensor], None]
"""Forward, loss and backward of one batch of token ids."""


def llama(shape: str, layers: int | None = None, max_tokens: int = 32768) -> LlamaForCausalLM:
    """A random-weight Llama of `shape` (optionally fewer layers), fp32, in train mode, with
    no KV cache (training keeps none) and positions up to `max_tokens`."""
    options = dict(SHAPES[shape])
    if layers is not None:
        options["num_hidden_layers"] = layers
    config = LlamaConfig(**options, use_cache=False, max_position_embeddings=max_tokens)
    return LlamaForCausalLM(config).train()


def _peft_lora(model: nn.Module) -> nn.Module:
    """PEFT's LoRA on every linear layer of the transformer layers (adapters kept in fp32)."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=RANK,
        lora_alpha=ALPHA,
        lora_dropout=0.0,
        target_modules=PEFT_TARGETS,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def _hf_step(model: nn.Module, autocast: bool) -> Step:
    """transformers' own causal-LM loss (`labels=`), under bf16 autocast when asked. No
    attention mask: batch 1 has no padding, and a mask of ones makes fake tensors build the
    causal mask that real ones skip (transformers cannot read a fake mask's values)."""

    def step(ids: torch.Tensor) -> None:
        with torch.autocast(ids.device.type, dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()

    return step


def quantize_like_transformers(model: LlamaForCausalLM) -> None:
    """NF4 + double quantisation, bf16 compute, as `from_pretrained(quantization_config=
    BitsAndBytesConfig(...))` does: transformers' own `replace_with_bnb_linear` (lm_head kept),
    then each weight quantised through `Params4bit(...).to(device)` as its `Bnb4bitQuantize`."""
    import bitsandbytes as bnb
    from transformers import BitsAndBytesConfig
    from transformers.integrations import replace_with_bnb_linear
    from transformers.quantizers import AutoHfQuantizer

    config = BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
    )
    quantizer = AutoHfQuantizer.from_config(config)
    keep = quantizer.get_modules_to_not_convert(model, None, model._keep_in_fp32_modules)
    weights = {n: m.weight.data for n, m in model.named_modules() if type(m) is nn.Linear}
    replace_with_bnb_linear(model, modules_to_not_convert=keep, quantization_config=config)
    for name, module in model.named_modules():
        if isinstance(module, bnb.nn.Linear4bit):
            value = weights[name]
            param: Any = bnb.nn.Params4bit(value, requires_grad=False, **module.weight.__dict__)
            module.weight = param.to(value.device)
    model.__dict__["is_loaded_in_4bit"] = True  # as transformers marks a 4-bit model


def _to_bf16(model: nn.Module) -> None:
    """Every floating-point tensor of `model` in bfloat16."""
    model.to(torch.bfloat16)


def peft_fp32(model: LlamaForCausalLM, counter: LiveBytes) -> Step:
    """(a) PEFT LoRA on the fp32 model, transformers' loss."""
    return _hf_step(_peft_lora(model), autocast=False)


def peft_bf16(model: LlamaForCausalLM, counter: LiveBytes) -> Step:
    """(b) bf16 base, bf16 autocast, transformers' gradient checkpointing, PEFT LoRA."""
    _to_bf16(model)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=CHECKPOINT_KWARGS)
    return _hf_step(_peft_lora(model), autocast=True)


def peft_qlora(model: LlamaForCausalLM, counter: LiveBytes) -> Step:
    """(c) QLoRA: NF4 base from a bf16 model, `prepare_model_for_kbit_training` (which casts
    the embeddings, norms and lm_head to fp32 and turns checkpointing on), PEFT LoRA, bf16
    autocast as `Trainer(bf16=True)` runs it."""
    from peft import prepare_model_for_kbit_training

    _to_bf16(model)
    quantize_like_transformers(model)
    prepare_model_for_kbit_training(model, gradient_checkpointing_kwargs=CHECKPOINT_KWARGS)
    return _hf_step(_peft_lora(model), autocast=True)


def _adaptlab(model: LlamaForCausalLM, quantize: bool) -> Step:
    """adaptlab's own preparation of a run (`prepare_base`: bf16 base, NF4 when `quantize`,
    checkpointing), LoRA (fp32, as the loop keeps what trains), and the forward and chunked
    loss under the loop's bf16 autocast (`autocast_at`)."""
    from adaptlab.engine.lm_loss import causal_lm_loss
    from adaptlab.engine.precision import autocast_at, keep_trained_in_float32
    from adaptlab.engine.scale_model import prepare_base
    from adaptlab.methods import adapt
    from adaptlab.records.scale import Scale

    scale = Scale("bf16", "bf16", gradient_checkpointing=True, quantize="nf4" if quantize else None)
    prepare_base(model, scale, next(model.parameters()).device)
    lora = {"rank": RANK, "alpha": float(ALPHA), "targets": ADAPTLAB_TARGETS}
    adapt(model, {"lora": lora}, train_head=False, keep_initial=False)
    keep_trained_in_float32(model)

    def step(ids: torch.Tensor) -> None:
        with autocast_at(scale.precision, ids.device):
            loss = causal_lm_loss(model, ids, None)
        loss.backward()

    return step


def adaptlab_bf16(model: LlamaForCausalLM, counter: LiveBytes) -> Step:
    """(d) adaptlab: bf16 base + autocast + checkpointing + chunked loss."""
    return _adaptlab(model, quantize=False)


def adaptlab_nf4(model: LlamaForCausalLM, counter: LiveBytes) -> Step:
    """(e) adaptlab: NF4 base + autocast + checkpointing + chunked loss."""
    return _adaptlab(model, quantize=True)


def adaptlab_offload(model: LlamaForCausalLM, counter: LiveBytes) -> Step:
    """(f) (e) inside `offloaded_activations` for a GPU (see `large_model_memory`): what its
    pack hook makes is counted as host memory, and each unpack gives the backward pass a new
    accelerator-side copy, as `.to("cuda")` of a host tensor does."""
    from adaptlab.engine.checkpointing import offloaded_activations

    inner = _adaptlab(model, quantize=True)

    def step(ids: torch.Tensor) -> None:
        hooks = offloaded_activations(torch.device("cuda"), model.parameters())
        if not isinstance(hooks, torch.autograd.graph.saved_tensors_hooks):
            raise TypeError(f"offloaded_activations gave a {type(hooks).__name__}, not hooks")
        pack, unpack = hooks.pack_hook, hooks.unpack_hook

        def pack_on_host(tensor: torch.Tensor) -> Any:
            with counter.on_host():
                return pack(tensor)

        def unpack_to_device(packed: Any) -> torch.Tensor:
            tensor = unpack(packed)
            return tensor.clone() if counter.is_host(tensor) else tensor

        hooks.pack_hook, hooks.unpack_hook = pack_on_host, unpack_to_device
        with hooks:
            inner(ids)

    return step


@dataclass(frozen=True)
class Setup:
    """One configuration of the table and the modules it needs."""

    key: str
    label: str
    build: Callable[[LlamaForCausalLM, LiveBytes], Step]
    imports: tuple[str, ...]
    offloads: bool = False

    def prepare(self) -> None:
        """Import what the setup uses and fill bitsandbytes' code-table cache, so that no
        module-level or cached tensor is made while a step is counted (it would count in
        whichever measurement came first)."""
        for name in self.imports:
            importlib.import_module(name)
        if "bitsandbytes" in self.imports:
            import bitsandbytes as bnb

            bnb.functional.quantize_4bit(
                torch.ones(256, dtype=torch.bfloat16), compress_statistics=True, quant_type="nf4"
            )


PEFT = ("peft", "bitsandbytes", "transformers.integrations", "transformers.quantizers")
ADAPTLAB = (
    "adaptlab.methods.adapt",
    "adaptlab.engine.checkpointing",
    "adaptlab.engine.lm_loss",
    "adaptlab.engine.precision",
)
NF4 = (*ADAPTLAB, "adaptlab.models.quantize", "bitsandbytes")
SETUPS = [
    Setup("a", "peft fp32", peft_fp32, PEFT),
    Setup("b", "peft bf16+ckpt", peft_bf16, PEFT),
    Setup("c", "peft qlora+ckpt", peft_qlora, PEFT),
    Setup("d", "adaptlab bf16", adaptlab_bf16, ADAPTLAB),
    Setup("e", "adaptlab nf4", adaptlab_nf4, NF4),
    Setup("f", "adaptlab nf4+offload", adaptlab_offload, NF4, offloads=True),
]

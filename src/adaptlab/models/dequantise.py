"""Turn a GGUF causal LM into a float32 safetensors folder, so later loads skip de-quantising."""

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

from adaptlab.models.quiet import quiet_transformers


def dequantise_gguf(folder: Path, gguf_file: str, work: Path) -> Path:
    """Load `folder/gguf_file` de-quantised to float32 and save model and tokenizer under `work`."""
    with quiet_transformers(progress=True):
        model = AutoModelForCausalLM.from_pretrained(
            folder,
            gguf_file=gguf_file,
            dtype=torch.float32,
            quantization_config=GgufConfig(dequantize=True),
        )
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
        out = work / "model"
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    return out

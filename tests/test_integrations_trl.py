"""An adapted causal LM under TRL's `SFTTrainer`, without a `peft_config`: only the adapter
trains, and the folder the callback leaves gives the trained model's logits."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers as T
from tiny_models import save_tiny_llama

import adaptlab
from adaptlab.integrations.hf import ADAPTER_SUBFOLDER, AdapterCheckpointCallback

trl = pytest.importorskip("trl", reason="trl comes with the integrations extra")
datasets = pytest.importorskip("datasets")


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random Llama causal LM with the MiniLM tokenizer, saved once."""
    return save_tiny_llama(str(tmp_path_factory.mktemp("tiny-llama")))


def sentences() -> list[str]:
    animals = ("cat", "dog", "bird", "fish")
    return [f"the {animals[i % 4]} number {i} sat on the mat" for i in range(16)]


@pytest.mark.parametrize("method", ("lora", "houlsby"))
def test_sft_trainer_trains_the_adapter_and_leaves_a_folder_with_its_logits(
    method: str, llama: str, tmp_path: Path
) -> None:
    model = T.AutoModelForCausalLM.from_pretrained(llama)
    tokenizer = T.AutoTokenizer.from_pretrained(llama)
    handle = adaptlab.adapt(model, method, train_head=False)
    start = {n: t.detach().clone() for n, t in handle.tensors().items()}
    config = trl.SFTConfig(
        str(tmp_path),
        max_steps=3,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        save_steps=2,
        max_length=32,
        eos_token=tokenizer.sep_token,  # the MiniLM tokenizer has no eos of its own
        bf16=False,  # TRL's default bf16 would leave the model's forward under autocast
        use_cpu=True,
        report_to="none",
        disable_tqdm=True,
    )
    trainer = trl.SFTTrainer(
        model=model,
        args=config,
        train_dataset=datasets.Dataset.from_dict({"text": sentences()}),
        processing_class=tokenizer,
        callbacks=[AdapterCheckpointCallback(handle)],
    )
    trainer.train()
    assert trainer.model is model
    optimized = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    assert optimized == {id(t) for t in handle.tensors().values()}
    assert any(not torch.equal(t, start[n]) for n, t in handle.tensors().items())
    ids = tokenizer(sentences()[:2], return_tensors="pt", padding=True)
    model.eval()
    with torch.no_grad():
        expected = model(**ids).logits
    fresh = T.AutoModelForCausalLM.from_pretrained(llama)
    adaptlab.load_adapter(fresh, tmp_path / ADAPTER_SUBFOLDER)
    with torch.no_grad():
        assert torch.allclose(fresh(**ids).logits, expected, atol=1e-5)
    with torch.no_grad(), adaptlab.disabled(fresh):
        assert not torch.allclose(fresh(**ids).logits, expected, atol=1e-3)
    assert (tmp_path / "checkpoint-2" / ADAPTER_SUBFOLDER / "manifest.json").is_file()

"""An adapted model under a real `transformers.Trainer`: only the adapter's tensors reach the
optimizer, the adapter folders the callback leaves load with `adaptlab.load_adapter` and give
the trained model's logits, and resuming from a slim checkpoint ends where an uninterrupted
run ends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import safetensors.torch
import torch
from tiny_models import tiny_inputs, tiny_model
from transformers import Trainer, TrainerCallback, TrainingArguments

import adaptlab
from adaptlab.errors import ConfigError
from adaptlab.integrations.hf import ADAPTER_SUBFOLDER, AdapterCheckpointCallback

pytest.importorskip("accelerate", reason="the Trainer needs accelerate (the integrations extra)")


def examples(count: int = 8) -> list[dict[str, torch.Tensor]]:
    """Fixed-length random sentences with labels 0, 1, 2, 0, ..."""
    rows = []
    for i in range(count):
        inputs = tiny_inputs(seed=100 + i, batch=1)
        rows.append({k: v[0] for k, v in inputs.items()} | {"labels": torch.tensor(i % 3)})
    return rows


def arguments(folder: Path, **options: object) -> TrainingArguments:
    settings: dict = dict(
        max_steps=4,
        per_device_train_batch_size=2,
        learning_rate=1e-2,
        save_steps=2,
        use_cpu=True,
        report_to="none",
        disable_tqdm=True,
        seed=0,
    )
    return TrainingArguments(str(folder), **(settings | options))


def trainer_of(model: torch.nn.Module, folder: Path, callback: TrainerCallback) -> Trainer:
    """A Trainer of `model` on the examples into `folder`, with `callback`."""
    return Trainer(
        model=model, args=arguments(folder), train_dataset=examples(), callbacks=[callback]
    )


def logits(model: torch.nn.Module) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(**tiny_inputs()).logits


def optimized(trainer: Trainer) -> set[int]:
    return {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}


@pytest.mark.parametrize("method", ("lora", "houlsby", "prefix", "ia3", "bitfit"))
def test_a_trainer_run_trains_only_the_adapter_and_leaves_its_folder(
    method: str, tmp_path: Path
) -> None:
    model = tiny_model("bert")
    handle = adaptlab.adapt(model, method)
    frozen = model.bert.embeddings.word_embeddings.weight.detach().clone()
    start = {n: t.detach().clone() for n, t in handle.tensors().items()}
    trainer = trainer_of(model, tmp_path, AdapterCheckpointCallback(handle))
    trainer.train()
    assert optimized(trainer) == {id(t) for t in handle.tensors().values()}
    assert torch.equal(model.bert.embeddings.word_embeddings.weight, frozen)
    moved = [n for n, t in handle.tensors().items() if not torch.equal(t, start[n])]
    assert len(moved) >= len(start) // 2
    expected = logits(model)
    for folder in (tmp_path / ADAPTER_SUBFOLDER, tmp_path / "checkpoint-4" / ADAPTER_SUBFOLDER):
        fresh = adaptlab.load_adapter(tiny_model("bert", head_seed=4), folder)
        assert torch.allclose(logits(fresh), expected, atol=1e-5)
    early = adaptlab.load_adapter(tiny_model("bert"), tmp_path / "checkpoint-2" / ADAPTER_SUBFOLDER)
    assert not torch.allclose(logits(early), expected, atol=1e-3)


def test_checkpoints_hold_only_the_trained_tensors_and_the_model_saves_whole_after(
    tmp_path: Path,
) -> None:
    model = tiny_model("bert")
    handle = adaptlab.adapt(model, "lora")
    trainer = trainer_of(model, tmp_path, AdapterCheckpointCallback(handle))
    trainer.train()
    saved = safetensors.torch.load_file(tmp_path / "checkpoint-2" / "model.safetensors")
    assert set(saved) == set(handle.trainable_names)
    trainer.save_model(str(tmp_path / "whole"))
    whole = safetensors.torch.load_file(tmp_path / "whole" / "model.safetensors")
    assert "bert.embeddings.word_embeddings.weight" in whole and len(whole) > len(saved)


def test_resuming_from_a_checkpoint_ends_where_an_uninterrupted_run_ends(tmp_path: Path) -> None:
    def run(folder: Path, resume: Path | None) -> dict[str, torch.Tensor]:
        model = tiny_model("bert")
        handle = adaptlab.adapt(model, "houlsby")
        trainer = trainer_of(model, folder, AdapterCheckpointCallback(handle))
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        return {n: t.detach().clone() for n, t in handle.tensors().items()}

    whole = run(tmp_path / "whole", None)
    resumed = run(tmp_path / "resumed", tmp_path / "whole" / "checkpoint-2")
    fresh = run(tmp_path / "fresh", None)  # a second uninterrupted run: the same numbers
    assert whole.keys() == resumed.keys()
    for name, tensor in whole.items():
        assert torch.allclose(resumed[name], tensor, atol=1e-6), name
        assert torch.allclose(fresh[name], tensor, atol=1e-6), name
    state = json.loads((tmp_path / "resumed" / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["global_step"] == 4


def test_a_named_adapter_trains_beside_a_frozen_one(tmp_path: Path) -> None:
    model = tiny_model("bert")
    first = adaptlab.add_adapter(model, "first", "lora")
    kept = {n: t.detach().clone() for n, t in first.tensors().items()}
    adaptlab.add_adapter(model, "second", "houlsby")
    adaptlab.set_active(model, adaptlab.Stack("first", "second"))
    second = adaptlab.train_adapter(model, "second")
    trainer = trainer_of(model, tmp_path, AdapterCheckpointCallback(model, name="second"))
    trainer.train()
    assert optimized(trainer) == {id(t) for t in second.tensors().values()}
    assert all(torch.equal(first.tensors()[n], t) for n, t in kept.items())
    expected = logits(model)
    fresh = adaptlab.load_adapter(tiny_model("bert", head_seed=4), tmp_path / ADAPTER_SUBFOLDER)
    assert adaptlab.active(fresh) == adaptlab.Stack("first", "second")
    assert torch.allclose(logits(fresh), expected, atol=1e-5)


def test_a_fuse_trains_with_its_value_penalty_and_its_folder_carries_the_adapters(
    tmp_path: Path,
) -> None:
    model = tiny_model("bert")
    adaptlab.add_adapter(model, "a", "pfeiffer", seed=1)
    adaptlab.add_adapter(model, "b", "pfeiffer", seed=2)
    adaptlab.add_fusion(model, adaptlab.Fuse("a", "b"))
    fusion = adaptlab.train_adapter(model, "fusion")
    with torch.no_grad():  # V away from the identity: a penalty to see
        for layer in fusion.fusion_layers.values():
            layer.value.weight.add_(0.1)
    callback = AdapterCheckpointCallback(fusion)
    inputs = tiny_inputs() | {"labels": torch.tensor([0, 1, 2])}
    callback.on_train_begin(arguments(tmp_path), None, None, model=model)  # type: ignore[arg-type]
    penalty = adaptlab.regularization_loss(model)
    assert penalty is not None and penalty.item() > 1e-3
    model.train()
    assert torch.allclose(seeded(model, inputs), seeded_ce(model, inputs) + penalty, atol=1e-6)
    model.eval()  # evaluation losses stay the model's own
    assert torch.allclose(seeded(model, inputs), seeded_ce(model, inputs), atol=1e-6)
    trainer = trainer_of(model, tmp_path, callback)
    trainer.train()
    assert optimized(trainer) == {id(t) for t in fusion.tensors().values()}
    model.train()  # the hook went with the training
    assert torch.allclose(seeded(model, inputs), seeded_ce(model, inputs), atol=1e-6)
    expected = logits(model)
    fresh = adaptlab.load_adapter(tiny_model("bert", head_seed=4), tmp_path / ADAPTER_SUBFOLDER)
    assert adaptlab.list_adapters(fresh) == ["a", "b", "fusion"]
    assert torch.allclose(logits(fresh), expected, atol=1e-5)


def seeded(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The model's loss, with dropout drawn from seed 0."""
    torch.manual_seed(0)
    return model(**inputs).loss


def seeded_ce(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The cross-entropy of the model's logits (the same dropout): the loss with nothing added."""
    torch.manual_seed(0)
    out = model(**{k: v for k, v in inputs.items() if k != "labels"}).logits
    return torch.nn.functional.cross_entropy(out, inputs["labels"])


def test_the_callback_refuses_a_trainer_of_another_model(tmp_path: Path) -> None:
    model = tiny_model("bert")
    handle = adaptlab.adapt(model, "lora")
    with pytest.raises(ConfigError, match="give the Trainer the adapted model itself"):
        trainer_of(tiny_model("bert"), tmp_path, AdapterCheckpointCallback(handle))

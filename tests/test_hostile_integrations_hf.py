"""`AdapterCheckpointCallback` misused: a model that trains more than the adapter or not the
adapter, a PEFT wrapper from `peft_config`, a checkpoint of another adapter or with damaged
tensors, and adapter folders where user files are. Each stops in one line (an AdaptlabError)
before anything trains, with every file as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
import safetensors.torch
import torch
from cli_cases import unchanged
from test_integrations_hf import arguments, examples
from tiny_models import tiny_model
from transformers import Trainer

import adaptlab
from adaptlab.errors import AdapterFileError, AdaptlabError, ConfigError
from adaptlab.integrations.hf import ADAPTER_SUBFOLDER, AdapterCheckpointCallback

pytest.importorskip("accelerate", reason="the Trainer needs accelerate (the integrations extra)")


def one_line(error: pytest.ExceptionInfo[AdaptlabError], *needles: str) -> str:
    """The error's message, which must be one line holding every needle."""
    message = str(error.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, (needle, message)
    return message


def trainer(model: torch.nn.Module, folder: Path, callback: AdapterCheckpointCallback) -> Trainer:
    return Trainer(
        model=model, args=arguments(folder), train_dataset=examples(), callbacks=[callback]
    )


def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def same(model: torch.nn.Module, before: dict[str, torch.Tensor]) -> bool:
    now = model.state_dict()
    return now.keys() == before.keys() and all(torch.equal(now[n], t) for n, t in before.items())


def test_an_added_adapter_that_neither_runs_nor_trains_alone_is_refused(tmp_path: Path) -> None:
    model = tiny_model("bert")
    handle = adaptlab.add_adapter(model, "sentiment", "lora")
    with unchanged(tmp_path), pytest.raises(ConfigError) as error:
        trainer(model, tmp_path, AdapterCheckpointCallback(handle))
    one_line(
        error,
        "adapter 'sentiment' does not run",
        "tensors outside adapter 'sentiment' would train (bert.embeddings",
        "call adaptlab.train_adapter(model, 'sentiment')",
    )
    adaptlab.set_active(model, "sentiment")  # runs now, but the base still trains
    with pytest.raises(ConfigError) as error:
        trainer(model, tmp_path, AdapterCheckpointCallback(handle))
    message = one_line(error, "tensors outside adapter 'sentiment' would train")
    assert "does not run" not in message
    adaptlab.train_adapter(model, "sentiment")
    for tensor in handle.tensors().values():
        tensor.requires_grad_(False)
    with pytest.raises(ConfigError) as error:
        trainer(model, tmp_path, AdapterCheckpointCallback(handle))
    one_line(error, "tensors of adapter 'sentiment' would not")


def test_a_model_made_trainable_after_the_trainer_is_refused_before_a_step(
    tmp_path: Path,
) -> None:
    model = tiny_model("bert")
    handle = adaptlab.adapt(model, "lora")
    run = trainer(model, tmp_path / "out", AdapterCheckpointCallback(handle))
    model.requires_grad_(True)
    before = weights(model)
    with unchanged(tmp_path), pytest.raises(ConfigError) as error:
        run.train()
    one_line(error, "would train", "adaptlab.train_adapter(model, 'default')")
    assert same(model, before)


def test_a_peft_wrapper_around_an_adapted_model_is_named(tmp_path: Path) -> None:
    peft = pytest.importorskip("peft")
    model = tiny_model("bert")
    handle = adaptlab.adapt(model, "lora")
    wrapped = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["query"]))
    with pytest.raises(ConfigError) as error:
        trainer(wrapped, tmp_path, AdapterCheckpointCallback(handle))
    one_line(error, "wraps the adapted model in a PeftModel", "no peft_config")


def test_sft_trainer_given_a_peft_config_and_an_adapted_model_is_refused(tmp_path: Path) -> None:
    trl = pytest.importorskip("trl")
    peft = pytest.importorskip("peft")
    datasets = pytest.importorskip("datasets")
    import transformers as T
    from tiny_models import save_tiny_llama

    llama = save_tiny_llama(str(tmp_path / "llama"))
    model = T.AutoModelForCausalLM.from_pretrained(llama)
    tokenizer = T.AutoTokenizer.from_pretrained(llama)
    handle = adaptlab.adapt(model, "lora", train_head=False)
    config = trl.SFTConfig(
        str(tmp_path / "sft"),
        max_steps=1,
        max_length=16,
        eos_token=tokenizer.sep_token,
        bf16=False,
        use_cpu=True,
        report_to="none",
        disable_tqdm=True,
    )
    with pytest.raises(ConfigError) as error:
        trl.SFTTrainer(
            model=model,
            args=config,
            train_dataset=datasets.Dataset.from_dict({"text": ["the cat sat"] * 4}),
            processing_class=tokenizer,
            peft_config=peft.LoraConfig(r=2, target_modules=["q_proj"]),
            callbacks=[AdapterCheckpointCallback(handle)],
        )
    one_line(error, "PeftModel", "peft_config", "adapter 'default'")
    assert not (tmp_path / "sft" / ADAPTER_SUBFOLDER).exists()


@pytest.fixture(scope="module")
def lora_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The slim checkpoint after step 2 of a LoRA run."""
    folder = tmp_path_factory.mktemp("lora-run")
    model = tiny_model("bert")
    trainer(model, folder, AdapterCheckpointCallback(adaptlab.adapt(model, "lora"))).train()
    return folder / "checkpoint-2"


def resume(checkpoint: Path, folder: Path, method: str, **options: object) -> torch.nn.Module:
    """Resume `checkpoint` onto a fresh model adapted with `method`; returns the model."""
    model = tiny_model("bert")
    handle = adaptlab.adapt(model, method, **options)
    run = trainer(model, folder, AdapterCheckpointCallback(handle))
    before = weights(model)
    try:
        run.train(resume_from_checkpoint=str(checkpoint))
    finally:
        assert same(model, before)
    return model


def test_resuming_a_checkpoint_of_another_method_names_both(
    lora_checkpoint: Path, tmp_path: Path
) -> None:
    with unchanged(lora_checkpoint), pytest.raises(AdapterFileError) as error:
        resume(lora_checkpoint, tmp_path, "houlsby")
    one_line(
        error,
        "the checkpoint holds adapter 'default' (lora)",
        "the model trains adapter 'default' (houlsby)",
        "adapt the model as it was when the checkpoint was written",
    )


def test_resuming_a_checkpoint_of_another_shape_or_subset_names_the_tensor(
    lora_checkpoint: Path, tmp_path: Path
) -> None:
    with unchanged(lora_checkpoint), pytest.raises(AdapterFileError) as error:
        resume(lora_checkpoint, tmp_path / "a", "lora", rank=4)
    one_line(error, "checkpoint tensor", "is (8,", "the model's (4,")
    with unchanged(lora_checkpoint), pytest.raises(AdapterFileError) as error:
        resume(lora_checkpoint, tmp_path / "b", "lora", targets=["query", "key", "value"])
    one_line(error, "the checkpoint does not fit adapter 'default' (lora)", "lacks 4")


def test_a_checkpoint_with_nan_tensors_is_refused(lora_checkpoint: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "checkpoint-2"
    damaged.mkdir()
    for path in lora_checkpoint.iterdir():
        if path.is_file():
            (damaged / path.name).write_bytes(path.read_bytes())
    tensors = safetensors.torch.load_file(damaged / "model.safetensors")
    first = sorted(tensors)[0]
    tensors[first] = torch.full_like(tensors[first], float("nan"))
    safetensors.torch.save_file(tensors, damaged / "model.safetensors")
    with unchanged(damaged), pytest.raises(AdapterFileError) as error:
        resume(damaged, tmp_path / "out", "lora")
    one_line(error, f"checkpoint tensor {first} holds NaN", "resume from an earlier checkpoint")


def test_a_damaged_adapter_folder_of_a_checkpoint_is_refused_on_load(
    lora_checkpoint: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "adapter"
    folder.mkdir()
    for path in (lora_checkpoint / ADAPTER_SUBFOLDER).iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    (folder / "manifest.json").write_text('{"format": "adaptlab-adapter", "methods": [')
    with unchanged(tmp_path), pytest.raises(AdapterFileError) as error:
        adaptlab.load_adapter(tiny_model("bert"), folder)
    one_line(error, "manifest.json")
    (folder / "manifest.json").write_bytes(
        (lora_checkpoint / ADAPTER_SUBFOLDER / "manifest.json").read_bytes()
    )
    (folder / "adapter.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}")
    with unchanged(tmp_path), pytest.raises(AdapterFileError) as error:
        adaptlab.load_adapter(tiny_model("bert"), folder)
    one_line(error, "adapter.safetensors")


def test_a_model_without_an_adapter_or_something_else_is_refused() -> None:
    with pytest.raises(ConfigError) as error:
        AdapterCheckpointCallback(tiny_model("bert"))
    one_line(error, "is not adapted")
    with pytest.raises(ConfigError) as error:
        AdapterCheckpointCallback("runs/lora")  # type: ignore[arg-type]
    one_line(error, "takes what adaptlab.adapt returned or an adapted model, got str")
    model = tiny_model("bert")
    handle = adaptlab.adapt(model, "lora")
    with pytest.raises(ConfigError) as error:
        AdapterCheckpointCallback(handle, name="other")
    one_line(error, "adapter 'default' and name='other'")


def test_user_files_where_the_adapter_folder_goes_are_refused(tmp_path: Path) -> None:
    model = tiny_model("bert")
    handle = adaptlab.adapt(model, "lora")
    target = tmp_path / ADAPTER_SUBFOLDER
    target.write_text("my notes\n")
    with unchanged(tmp_path), pytest.raises(ConfigError) as error:
        trainer(model, tmp_path, AdapterCheckpointCallback(handle))
    one_line(error, f"{target} is a file")
    target.unlink()
    target.mkdir()
    (target / "results.csv").write_text("a,b\n")
    with unchanged(tmp_path), pytest.raises(ConfigError) as error:
        trainer(model, tmp_path, AdapterCheckpointCallback(handle))
    one_line(error, "holds results.csv, which adaptlab did not write")
    (target / "results.csv").unlink()
    target.rmdir()
    (tmp_path / "elsewhere").mkdir()
    target.symlink_to(tmp_path / "elsewhere")
    with unchanged(tmp_path), pytest.raises(ConfigError) as error:
        trainer(model, tmp_path, AdapterCheckpointCallback(handle))
    one_line(error, "symbolic link")


def test_a_second_run_into_the_same_output_dir_replaces_its_adapter_folder(
    tmp_path: Path,
) -> None:
    for seed in (0, 1):
        model = tiny_model("bert")
        handle = adaptlab.adapt(model, "lora", seed=seed)
        trainer(model, tmp_path, AdapterCheckpointCallback(handle)).train()
        saved = adaptlab.load_adapter(tiny_model("bert"), tmp_path / ADAPTER_SUBFOLDER)
        fresh = adaptlab.get_handle(saved).tensors()
        assert all(torch.equal(fresh[n], t.detach()) for n, t in handle.tensors().items())

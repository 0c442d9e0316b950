"""LoRA to and from PEFT: an exported adapter loads in PEFT with the same logits, and back."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
from tiny_models import tiny_inputs, tiny_model, train_steps

import adaptlab
from adaptlab.errors import AdapterFileError
from adaptlab.methods.peft_format import export_peft
from adaptlab.methods.peft_import import import_peft

peft = pytest.importorskip("peft", reason="peft comes with the bench extra")


def logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(**tiny_inputs()).logits


def peft_model(base: torch.nn.Module, folder: Path) -> torch.nn.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return peft.PeftModel.from_pretrained(base, str(folder)).eval()


@pytest.mark.parametrize("arch", ("bert", "roberta", "distilbert", "llama"))
def test_an_exported_adapter_gives_peft_the_same_logits(arch: str, tmp_path: Path) -> None:
    model = tiny_model(arch)
    adaptlab.adapt(model, "lora", targets=("query", "value", "ffn_out"), alpha=16.0)
    train_steps(model)
    expected = logits(model)
    export_peft(model, tmp_path)
    config = json.loads((tmp_path / "adapter_config.json").read_text())
    assert config["r"] == 8 and config["lora_alpha"] == 16.0 and config["task_type"] == "SEQ_CLS"
    loaded = peft_model(tiny_model(arch, head_seed=4), tmp_path)
    assert (logits(loaded) - expected).abs().max().item() <= 1e-5


@pytest.mark.parametrize("arch", ("bert", "llama"))
def test_a_peft_adapter_imports_with_the_same_logits(arch: str, tmp_path: Path) -> None:
    base = tiny_model(arch)
    config = peft.LoraConfig(
        r=4,
        lora_alpha=8,
        target_modules=["query", "value", "q_proj", "v_proj"],
        task_type="SEQ_CLS",
    )
    trained = peft.get_peft_model(base, config)
    with torch.no_grad():  # B starts at zero: give the pairs values
        for name, param in trained.named_parameters():
            if "lora_B" in name or "modules_to_save" in name:
                param.normal_(0, 0.1)
    trained.eval()
    expected = logits(trained)
    trained.save_pretrained(str(tmp_path))
    model = tiny_model(arch, head_seed=4)
    handle = import_peft(model, tmp_path)
    adaptlab.set_active(model, handle.name)
    assert handle.configs[0].to_dict()["targets"] == ["query", "value"]
    assert (logits(model) - expected).abs().max().item() <= 1e-5


def test_export_then_import_is_the_same_adapter(tmp_path: Path) -> None:
    model = tiny_model("bert")
    adaptlab.adapt(model, "lora")
    train_steps(model)
    expected = logits(model)
    export_peft(model, tmp_path)
    fresh = tiny_model("bert", head_seed=2)
    import_peft(fresh, tmp_path, name="imported")
    adaptlab.set_active(fresh, "imported")
    assert torch.equal(logits(fresh), expected)


def test_only_lora_adapters_are_exported(tmp_path: Path) -> None:
    model = tiny_model("bert")
    adaptlab.adapt(model, "lora+bitfit")
    with pytest.raises(AdapterFileError, match="takes a LoRA adapter; 'default' is lora\\+bitfit"):
        export_peft(model, tmp_path)
    assert not (tmp_path / "adapter_config.json").exists()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"use_dora": True}, "use_dora=True has no equivalent"),
        ({"rank_pattern": {"query": 2}}, "rank_pattern"),
        ({"peft_type": "IA3"}, "not a PEFT LoRA adapter"),
        ({"r": "8"}, "r must be a whole number of at least 1"),
    ],
)
def test_peft_options_without_an_equivalent_are_refused(
    edit: dict, message: str, tmp_path: Path
) -> None:
    model = tiny_model("bert")
    adaptlab.adapt(model, "lora")
    export_peft(model, tmp_path)
    path = tmp_path / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **edit}))
    fresh = tiny_model("bert")
    with pytest.raises(AdapterFileError, match=message) as error:
        import_peft(fresh, tmp_path)
    assert "\n" not in str(error.value) and adaptlab.list_adapters(fresh) == []


def test_pickle_weights_and_partial_layers_are_refused(tmp_path: Path) -> None:
    model = tiny_model("bert")
    adaptlab.adapt(model, "lora")
    export_peft(model, tmp_path)
    tensors = tmp_path / "adapter_model.safetensors"
    data = tensors.read_bytes()
    tensors.rename(tmp_path / "adapter_model.bin")
    with pytest.raises(AdapterFileError, match="pickle, which adaptlab does not load"):
        import_peft(tiny_model("bert"), tmp_path)
    (tmp_path / "adapter_model.bin").unlink()
    import safetensors.torch

    kept = {k: v for k, v in safetensors.torch.load(data).items() if "layer.1." not in k}
    tensors.write_bytes(safetensors.torch.save(kept))
    with pytest.raises(AdapterFileError, match="in some blocks only"):
        import_peft(tiny_model("bert"), tmp_path)


def test_a_builtin_alias_is_exported_as_its_hub_id_and_kept_in_adaptlab_json(
    tmp_path: Path,
) -> None:
    model = tiny_model("bert")
    adaptlab.adapt(model, "lora")
    export_peft(model, tmp_path, base_model_id="minilm-l6", label_names=["neg", "neu", "pos"])
    config = json.loads((tmp_path / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "sentence-transformers/all-MiniLM-L6-v2"
    about = json.loads((tmp_path / "adaptlab.json").read_text())
    assert about["base_model"]["adaptlab_name"] == "minilm-l6"
    assert about["base_model"]["id"] == config["base_model_name_or_path"]
    assert about["label_names"] == ["neg", "neu", "pos"]
    assert about["id2label"] == {"0": "neg", "1": "neu", "2": "pos"}
    assert about["label2id"] == {"neg": 0, "neu": 1, "pos": 2}
    assert about["modules_to_save"]["classifier"] == "the task head"
    assert about["modules_to_save"]["bert.pooler"].startswith("a pretrained part of the base")
    card = (tmp_path / "README.md").read_text()
    assert "base_model: sentence-transformers/all-MiniLM-L6-v2" in card and "2 = pos" in card


def test_a_causal_lm_export_records_no_labels(tmp_path: Path) -> None:
    model = tiny_model("llama", causal=True)
    adaptlab.adapt(model, "lora", train_head=False)
    export_peft(model, tmp_path)
    about = json.loads((tmp_path / "adaptlab.json").read_text())
    assert about["label_names"] is None and "id2label" not in about
    assert about["modules_to_save"] == {}


def save_body(model: torch.nn.Module, folder: Path) -> str:
    """The classifier's body as a plain BERT folder with no labels, as a hub encoder is."""
    import transformers as T
    from tiny_models import tiny_config

    body = T.BertModel(tiny_config("bert"))
    body.load_state_dict(model.bert.state_dict())
    body.save_pretrained(str(folder))
    return str(folder)


@pytest.mark.parametrize("labels", (["fresh", "rotten"], ["neg", "neu", "pos"]))
def test_auto_peft_model_loads_an_exported_folder_with_its_labels(
    labels: list[str], tmp_path: Path
) -> None:
    model = tiny_model("bert", num_labels=len(labels))
    base = save_body(model, tmp_path / "base")
    adaptlab.adapt(model, "lora", targets=("query", "value", "ffn_out"))
    train_steps(model)
    expected = logits(model)
    export_peft(model, tmp_path / "peft", base_model_id=base, label_names=labels)
    names = json.loads((tmp_path / "peft" / "adaptlab.json").read_text())["label_names"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if len(labels) == 2:  # the base's default head size: the folder loads as it is
            plain = peft.AutoPeftModelForSequenceClassification.from_pretrained(
                str(tmp_path / "peft")
            )
            assert (logits(plain.eval()) - expected).abs().max().item() <= 1e-5
        loaded = peft.AutoPeftModelForSequenceClassification.from_pretrained(  # as the card says
            str(tmp_path / "peft"),
            id2label=dict(enumerate(names)),
            label2id={label: i for i, label in enumerate(names)},
        ).eval()
    assert (logits(loaded) - expected).abs().max().item() <= 1e-5
    assert loaded.config.id2label == dict(enumerate(labels))
    assert loaded.config.label2id == {label: i for i, label in enumerate(labels)}


def test_a_run_exported_by_the_cli_loads_in_peft_with_its_label_names(
    tiny_model_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import transformers as T
    from cli_cases import run_cli, write_reviews

    from adaptlab.records.config import TrainConfig
    from adaptlab.runs.run import RunSpec, execute

    train = TrainConfig(epochs=1, batch_size=16, learning_rate=1e-3, seed=0)
    spec = RunSpec.build(
        tiny_model_dir, str(write_reviews(tmp_path / "r.csv")), "lora", train=train
    )
    execute(spec, tmp_path / "run", progress=False)
    out = ["--adapter", str(tmp_path / "run"), str(tmp_path / "p"), "--model", tiny_model_dir]
    code, _, err = run_cli(["export", *out], capsys)
    assert code == 0, err
    config = json.loads((tmp_path / "p" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == tiny_model_dir
    manifest = adaptlab.read_manifest(tmp_path / "run" / "adapter")
    names = json.loads((tmp_path / "p" / "adaptlab.json").read_text())["label_names"]
    assert names == manifest["label_names"] and len(names) == 2
    base = T.AutoModelForSequenceClassification.from_pretrained(tiny_model_dir, num_labels=2)
    ours = adaptlab.load_adapter(base, tmp_path / "run").eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = peft.AutoPeftModelForSequenceClassification.from_pretrained(
            str(tmp_path / "p"),
            id2label=dict(enumerate(names)),
            label2id={label: i for i, label in enumerate(names)},
        ).eval()
    assert (logits(theirs) - logits(ours)).abs().max().item() <= 1e-5
    assert theirs.config.id2label == ours.config.id2label == dict(enumerate(names))


def test_a_peft_causal_lm_adapter_imports_with_the_same_logits(tmp_path: Path) -> None:
    base = tiny_model("llama", causal=True)
    config = peft.LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"
    )
    trained = peft.get_peft_model(base, config)
    with torch.no_grad():  # B starts at zero: give the pairs values
        for name, param in trained.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.1)
    trained.eval()
    expected = logits(trained)
    trained.save_pretrained(str(tmp_path))
    model = tiny_model("llama", causal=True)
    handle = import_peft(model, tmp_path)
    adaptlab.set_active(model, handle.name)
    assert not handle.groups.get("head")
    assert (logits(model) - expected).abs().max().item() <= 1e-5
    with pytest.raises(AdapterFileError, match="CAUSAL_LM is a causal-LM adapter, but the model"):
        import_peft(tiny_model("llama"), tmp_path)


def test_what_peft_would_run_otherwise_is_not_exported(tmp_path: Path) -> None:
    """PEFT runs one LoRA by itself, and gives a classifier without a saved head a new one."""
    stacked = tiny_model("bert")
    adaptlab.add_adapter(stacked, "lang", "pfeiffer", train_head=False)
    adaptlab.add_adapter(stacked, "task", "lora")
    adaptlab.set_active(stacked, adaptlab.Stack("lang", "task"))
    with pytest.raises(AdapterFileError, match="runs with 'lang' as Stack\\('lang', 'task'\\)"):
        export_peft(stacked, tmp_path / "stacked", name="task")
    adaptlab.set_active(stacked, "task")  # by itself it runs as PEFT would run it
    export_peft(stacked, tmp_path / "alone", name="task")
    headless = tiny_model("bert")
    adaptlab.adapt(headless, "lora", train_head=False)
    with pytest.raises(AdapterFileError, match="has no trained head, and PEFT would give"):
        export_peft(headless, tmp_path / "headless")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alone"]


def test_a_gpt2_adapter_on_its_conv1d_layers_imports_and_one_on_its_fused_layer_is_refused(
    tmp_path: Path,
) -> None:
    """PEFT's GPT-2 LoRA on `c_proj` and `c_fc` (Conv1D, fan_in_fan_out) imports to the same
    logits; one on `c_attn` (query, key and value in one layer, one pair for all three) cannot
    be one pair per part, and is refused in one line."""
    from model_zoo import BY_NAME

    gpt2 = BY_NAME["gpt2"]
    expected = {}
    for targets, folder in ((["c_proj", "c_fc"], "conv1d"), (["c_attn"], "fused")):
        config = peft.LoraConfig(
            r=4, lora_alpha=8, target_modules=targets, fan_in_fan_out=True, task_type="CAUSAL_LM"
        )
        trained = peft.get_peft_model(gpt2.model(), config)
        with torch.no_grad():
            for name, param in trained.named_parameters():
                if "lora_B" in name:
                    param.normal_(0, 0.1)
            expected[folder] = trained.eval()(**gpt2.inputs()).logits
        trained.save_pretrained(str(tmp_path / folder))
    model = gpt2.model()
    handle = import_peft(model, tmp_path / "conv1d")
    adaptlab.set_active(model, handle.name)
    assert handle.configs[0].to_dict()["targets"] == ["attention_out", "ffn_in", "ffn_out"]
    with torch.no_grad():
        gap = (model(**gpt2.inputs()).logits - expected["conv1d"]).abs().max().item()
    assert gap <= 1e-5
    with pytest.raises(AdapterFileError, match=r"'transformer\.h\.0\.attn\.c_attn' is a fused"):
        import_peft(gpt2.model(), tmp_path / "fused")

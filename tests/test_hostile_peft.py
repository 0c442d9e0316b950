"""PEFT folders from others, and exports PEFT cannot represent: every case is one `error:` line,
exit 1, nothing written and every input unchanged byte for byte; a legitimate folder imports
and says what it did.

Import (`adaptlab import --format peft`): a folder made for another base model (unless
--force), a scaling or an update that overflows the forward pass, a classifier without its
head, a causal-LM adapter (imported as one), and config fields, tensor names, shapes and files
of every wrong kind. Export (`adaptlab export --format peft`): an adapter that runs stacked on
another.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import safetensors.torch
import torch
from cli_cases import copy_tree, refused, run_cli, unchanged, write_reviews
from peft_helpers import LABELS, edited, give_lora_pairs_values, import_args, import_refused
from tiny_models import save_tiny_bert, save_tiny_llama

import adaptlab
from adaptlab.methods.manifest import parse_manifest
from adaptlab.methods.peft_config import CONFIG_FILE, PeftConfig, check_base
from adaptlab.methods.peft_format import TENSOR_FILE, export_peft
from adaptlab.models.loading import load_model
from adaptlab.serve.registry import is_causal_lm

IDS = torch.tensor([[5, 17, 42, 9, 77, 31]])


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny BERT and a tiny Llama folder, and a PEFT LoRA folder made on each: a classifier
    (query and value) and a causal-LM adapter, with their logits."""
    root = tmp_path_factory.mktemp("hostile-peft")
    model = Path(save_tiny_bert(str(root / "tiny-bert")))
    llama = Path(save_tiny_llama(str(root / "tiny-llama")))
    classifier = load_model(str(model), "single_label", label_names=LABELS.split(","), seed=0)
    adaptlab.adapt(classifier.model, "lora", targets=("query", "value"))
    causal = load_model(str(llama), "causal_lm", seed=0).model
    adaptlab.adapt(causal, "lora", train_head=False)
    give_lora_pairs_values(classifier.model, causal)
    with torch.no_grad():
        logits = causal.eval()(input_ids=IDS).logits
    export_peft(classifier.model, root / "peft", base_model_id=str(model))
    export_peft(causal, root / "causal", base_model_id=str(llama))
    return {"root": root, "model": model, "llama": llama, "causal_logits": logits}


@pytest.fixture
def peft_copy(setup: dict[str, Any], tmp_path: Path) -> Path:
    """An unedited copy of the classifier's PEFT folder in this test's `tmp_path`."""
    return edited(setup, tmp_path)


def update(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda config: config.update(fields)


# --- 1. another base model ----------------------------------------------------------------


def test_a_folder_made_for_another_base_model_is_refused_unless_forced(
    setup: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = edited(setup, tmp_path, update(base_model_name_or_path="FacebookAI/roberta-base"))
    import_refused(
        setup, source, capsys, str(source / CONFIG_FILE),
        "base_model_name_or_path is 'FacebookAI/roberta-base', not", "--force",
    )  # fmt: skip
    args = import_args(setup["model"], source, "--labels", LABELS, "--force")
    with unchanged(setup["root"]):
        code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert "names the base model 'FacebookAI/roberta-base'" in out and "(--force)" in out
    assert (tmp_path / "out" / "manifest.json").is_file()


def config_naming(base: str | None) -> PeftConfig:
    return PeftConfig(Path(CONFIG_FILE), "SEQ_CLS", base, 8, 8.0, 0.0, ("query",), ())


def test_the_same_base_model_under_its_other_names_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A built-in's alias and hub id name the same model; so do two spellings of one folder
    and a folder of the hub cache and its hub id. A folder naming no base model says so."""
    hub = "sentence-transformers/all-MiniLM-L6-v2"
    assert check_base(config_naming(hub), "minilm-l6", force=False) is None
    assert check_base(config_naming("minilm-l6"), hub.upper(), force=False) is None
    folder = tmp_path / "models" / "bert"
    folder.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert check_base(config_naming(str(folder) + "/"), "models/bert", force=False) is None
    cached = tmp_path / "hub" / "models--org--tiny" / "snapshots" / "abc123"
    cached.mkdir(parents=True)
    assert check_base(config_naming("org/tiny"), str(cached), force=False) is None
    note = check_base(config_naming(None), "minilm-l6", force=False)
    assert note is not None and "names no base model" in note
    with pytest.raises(adaptlab.AdaptlabError, match="not 'models/bert'"):
        check_base(config_naming(hub), "models/bert", force=False)


# --- 2. a forward pass that overflows ------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "needles"),
    [
        (update(lora_alpha=1e308), ("lora_alpha / r is 1.25e+307", "past 1,000,000")),
        (update(lora_alpha=1e30), ("lora_alpha / r is 1.25e+29",)),
        (update(lora_alpha=float("inf")), ("lora_alpha must be a finite number", "inf")),
    ],
    ids=["1e308", "1e30", "infinity"],
)
def test_a_scaling_past_a_finite_forward_is_refused(
    edit: Callable[[dict[str, Any]], None],
    needles: tuple[str, ...],
    setup: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = edited(setup, tmp_path, edit)
    import_refused(setup, source, capsys, str(source / CONFIG_FILE), *needles)


def test_an_update_past_a_trained_weight_is_refused(
    setup: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each tensor within what a trained weight holds, their product (alpha / r) B A not."""
    big = {k: torch.full_like(v, 9e5) if "lora_" in k else v for k, v in load_peft(setup).items()}
    source = edited(setup, tmp_path, tensors=lambda _: big)
    import_refused(setup, source, capsys, "times lora_B @ lora_A of 'bert.encoder.layer.0.")


def load_peft(setup: dict[str, Any]) -> dict[str, torch.Tensor]:
    return safetensors.torch.load_file(str(setup["root"] / "peft" / TENSOR_FILE))


# --- 3. a classifier without its head -------------------------------------------------------


def body_only(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v for k, v in tensors.items() if ".lora_" in k}


def test_a_classifier_without_its_head_is_refused(
    setup: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = edited(setup, tmp_path, update(modules_to_save=None), body_only)
    import_refused(
        setup, source, capsys, "a SEQ_CLS adapter needs its trained head", "'classifier.",
        "(modules_to_save: null)", "random weights",
    )  # fmt: skip


def test_a_classifier_with_part_of_its_head_is_refused(
    setup: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def bias_only(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k: v for k, v in tensors.items() if ".lora_" in k or k.endswith("classifier.bias")}

    source = edited(setup, tmp_path, update(modules_to_save=["classifier"]), bias_only)
    import_refused(setup, source, capsys, "has no 'classifier.weight'")


# --- 4. a causal-LM adapter -----------------------------------------------------------------


def test_a_causal_lm_folder_imports_as_a_causal_lm_adapter(
    setup: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = copy_tree(setup["root"] / "causal", tmp_path / "causal")
    with unchanged(source):
        code, out, err = run_cli(import_args(setup["llama"], source), capsys)
    assert code == 0, err
    assert "lora on LlamaForCausalLM (a causal-LM adapter" in out
    manifest = parse_manifest(tmp_path / "out")
    assert is_causal_lm(manifest) and manifest.task is None and manifest.label_names is None
    model = load_model(str(setup["llama"]), "causal_lm", seed=0).model.eval()
    adaptlab.load_adapter(model, tmp_path / "out")
    with torch.no_grad():
        logits = model(input_ids=IDS).logits
    assert (logits - setup["causal_logits"]).abs().max().item() <= 1e-5


@pytest.mark.parametrize(
    ("folder", "extra", "needles"),
    [
        ("causal", ("--labels", LABELS), ("task_type CAUSAL_LM", "leave out --labels")),
        ("causal", ("--task", "single_label"), ("leave out --labels and --task",)),
        ("peft", ("--labels", LABELS, "--task", "token"), ("does not fit --task token",)),
        ("peft", (), ("task_type SEQ_CLS is a classifier: give --labels",)),
    ],
    ids=["causal-with-labels", "causal-with-task", "seq-cls-as-token", "seq-cls-no-labels"],
)
def test_options_that_do_not_fit_the_task_type_are_refused(
    folder: str,
    extra: tuple[str, ...],
    needles: tuple[str, ...],
    setup: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = copy_tree(setup["root"] / folder, tmp_path / folder)
    model = setup["llama"] if folder == "causal" else setup["model"]
    with unchanged(setup["root"]), unchanged(tmp_path):
        refused(import_args(model, source, *extra), capsys, str(source / CONFIG_FILE), *needles)


# --- 5. an export PEFT cannot represent ---------------------------------------------------


def test_a_lora_stacked_on_another_adapter_is_not_exported(
    setup: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_reviews(tmp_path / "reviews.csv")
    train = ["train", "--model", str(setup["model"]), "--data", str(data), "--epochs", "1",
             "--batch-size", "8", "--learning-rate", "1e-3", "--no-progress"]  # fmt: skip
    below, stacked = tmp_path / "runs" / "other", tmp_path / "runs" / "stacked"
    assert run_cli([*train, "--method", "pfeiffer", "--out", str(below)], capsys)[0] == 0
    args = [*train, "--method", "lora", "--stack", str(below), "--out", str(stacked)]
    assert run_cli(args, capsys)[0] == 0
    export = ["export", "--adapter", str(stacked), "--model", str(setup["model"])]
    with unchanged(tmp_path), unchanged(setup["root"]):
        refused(
            [*export, str(tmp_path / "peft")], capsys,
            "adapter 'default' runs with 'other' as Stack('other', 'default')",
            "PEFT's format holds one LoRA adapter",
        )  # fmt: skip
    assert not (tmp_path / "peft").exists()


# --- 6. config fields, tensors and files of every wrong kind --------------------------------


def drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda config: config.pop(key)


CONFIG_CASES: dict[str, tuple[Callable[[dict[str, Any]], None], tuple[str, ...]]] = {
    "task-unknown": (update(task_type="FOO"), ("task_type is 'FOO'", "SEQ_CLS, TOKEN_CLS")),
    "task-other-head": (update(task_type="QUESTION_ANS"), ("task_type is 'QUESTION_ANS'",)),
    "task-null": (update(task_type=None), ("task_type is None",)),
    "task-missing": (drop("task_type"), ("task_type is None",)),
    "r-zero": (update(r=0), ("r must be a whole number of at least 1, got 0",)),
    "r-negative": (update(r=-4), ("got -4",)),
    "r-float": (update(r=8.0), ("got 8.0",)),
    "r-bool": (update(r=True), ("got True",)),
    "r-huge": (update(r=10**12), ("where r = 1000000000000 needs",)),
    "r-400-digits": (update(r=10**400), ("r must be a whole number of at least 1, got 1000",)),
    "alpha-400-digits": (update(lora_alpha=10**400), ("lora_alpha must be a finite number",)),
    "alpha-zero": (update(lora_alpha=0), ("lora_alpha must be a finite number above 0",)),
    "alpha-text": (update(lora_alpha="8"), ("got '8'",)),
    "dropout-above-1": (update(lora_dropout=1.5), ("lora_dropout must be a number in [0, 1)",)),
    "dropout-1": (update(lora_dropout=1.0), ("got 1.0",)),
    "dropout-negative": (update(lora_dropout=-0.1), ("got -0.1",)),
    "targets-object": (update(target_modules={"query": 1}), ("target_modules must be a list",)),
    "targets-number": (update(target_modules=5), ("got 5",)),
    "targets-nested": (update(target_modules=[["query"]]), ("got [['query']]",)),
    "targets-empty-name": (update(target_modules=[""]), ("got ['']",)),
    "targets-nothing": (update(target_modules=["q_proj"]), ("match no module",)),
    "targets-backtracking": (update(target_modules="(.*)*x"), ("repeats a repeat",)),
    "targets-many-repeats": (update(target_modules=".*.*.*.*x"), ("holds 4 repeats",)),
    "targets-backreference": (update(target_modules="(a)\\1"), ("refers back to a group",)),
    "dora-zero": (update(use_dora=0), ("use_dora=0 has no equivalent",)),
    "dora-text": (update(use_dora="false"), ("use_dora='false'",)),
    "dora-null": (update(use_dora=None), ("use_dora=None",)),
    "rslora-one": (update(use_rslora=1), ("use_rslora=1",)),
    "fan-in-fan-out-zero": (update(fan_in_fan_out=0), ("fan_in_fan_out=0",)),
    "missing-r": (drop("r"), ("r is missing",)),
    "missing-alpha": (drop("lora_alpha"), ("lora_alpha is missing",)),
    "missing-dropout": (drop("lora_dropout"), ("lora_dropout is missing",)),
    "missing-targets": (drop("target_modules"), ("target_modules is missing",)),
    "base-not-text": (update(base_model_name_or_path=["x"]), ("base_model_name_or_path must",)),
    "base-unknown-home": (update(base_model_name_or_path="~nobody-here/m"), ("'~nobody-here/m'",)),
    "base-nul-byte": (update(base_model_name_or_path="m\x00"), ("'m\\x00', not",)),
}


@pytest.mark.parametrize("case", CONFIG_CASES)
def test_config_fields_of_the_wrong_kind_are_refused(
    case: str, setup: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit, needles = CONFIG_CASES[case]
    source = edited(setup, tmp_path, edit)
    import_refused(setup, source, capsys, *needles)


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("{not json", ("not valid JSON",)),
        ("[1, 2]", ("not a PEFT LoRA adapter",)),
        ('{"peft_type": "LORA", "pad": "' + "x" * (1 << 20) + '"}', ("more than a PEFT config",)),
    ],
    ids=["not-json", "a-list", "huge"],
)
def test_a_config_that_is_no_config_is_refused(
    text: str,
    needles: tuple[str, ...],
    setup: dict[str, Any],
    peft_copy: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (peft_copy / CONFIG_FILE).write_text(text)
    import_refused(setup, peft_copy, capsys, str(peft_copy / CONFIG_FILE), *needles)


def renamed(old: str, new: str) -> Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]:
    return lambda tensors: {k.replace(old, new): v for k, v in tensors.items()}


QUERY = "base_model.model.bert.encoder.layer.0.attention.self.query"
TENSOR_CASES: dict[str, tuple[Callable[..., dict[str, torch.Tensor]], tuple[str, ...]]] = {
    "adapter-name-kept": (renamed("lora_A.weight", "lora_A.default.weight"), ("PEFT writes only",)),
    "dora-magnitude": (
        lambda ts: {**ts, f"{QUERY}.lora_magnitude_vector": torch.ones(32)},
        ("lora_magnitude_vector' is one PEFT writes only",),
    ),
    "no-prefix": (renamed("base_model.model.", "model."), ("is not base_model.model.*",)),
    "ranks-apart": (
        lambda ts: {k: v[:4] if "lora_A" in k else v for k, v in ts.items()},
        ("has shapes (4, 32) and (32, 8), where r = 8",),
    ),
    "flat": (
        lambda ts: {k: v.reshape(-1) if "lora_A" in k else v for k, v in ts.items()},
        ("has shapes (256,)",),
    ),
    "half-a-pair": (
        lambda ts: {k: v for k, v in ts.items() if not k.endswith("query.lora_B.weight")},
        ("has no lora_B",),
    ),
    "nan": (lambda ts: {k: torch.full_like(v, float("nan")) for k, v in ts.items()}, ("NaN",)),
    "float64": (lambda ts: {k: v.double() for k, v in ts.items()}, ("is float64",)),
    "wrong-width": (
        lambda ts: {k: torch.zeros(8, 16) if k == f"{QUERY}.lora_A.weight" else v
                    for k, v in ts.items()},
        ("lora_A' has shape (8, 16) in the adapter but (8, 32)",),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", TENSOR_CASES)
def test_tensors_peft_would_not_write_are_refused(
    case: str, setup: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit, needles = TENSOR_CASES[case]
    source = edited(setup, tmp_path, tensors=edit)
    import_refused(setup, source, capsys, *needles)


def link_to(target: Path) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        path.unlink()
        os.symlink(target, path)

    return make


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def pickle_only(path: Path) -> None:
    path.rename(path.with_name("adapter_model.bin"))


def a_folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize(
    ("name", "damage", "needles"),
    [
        (TENSOR_FILE, "link", ("adapter_model.safetensors: a symbolic link",)),
        (CONFIG_FILE, "link", ("adapter_config.json: a symbolic link",)),
        (TENSOR_FILE, "dev-zero", ("a symbolic link (to /dev/zero)",)),
        (TENSOR_FILE, "truncated", ("cannot be read as safetensors",)),
        (TENSOR_FILE, "pickle", ("adapter_model.bin holds pickle, which adaptlab does not load",)),
        (TENSOR_FILE, "folder", ("not a file; not a PEFT adapter folder",)),
    ],
)
def test_files_that_are_not_the_folders_own_are_refused(
    name: str,
    damage: str,
    needles: tuple[str, ...],
    setup: dict[str, Any],
    peft_copy: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    damages: dict[str, Callable[[Path], None]] = {
        "link": link_to(setup["root"] / "peft" / name),
        "dev-zero": link_to(Path("/dev/zero")),
        "truncated": truncate,
        "pickle": pickle_only,
        "folder": a_folder,
    }
    damages[damage](peft_copy / name)
    import_refused(setup, peft_copy, capsys, *needles)

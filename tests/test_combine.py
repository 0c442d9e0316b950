"""Combining trained adapter folders (`adaptlab.combine_adapters`, `adaptlab combine`): what the
combined folder computes, its heads and its manifest (refusals: `test_combine_refusals`)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_cases import run_cli
from tiny_models import tiny_inputs

import adaptlab
from adaptlab.engine.restore import load_trained
from adaptlab.errors import AdaptlabError
from adaptlab.methods.persistence import read_manifest, save_adapter
from adaptlab.models.loading import load_model

SENTIMENT = ("negative", "positive")
TOPICS = ("arts", "science", "sport")
LORA = {"lora": {"rank": 4, "targets": ["query", "value"]}}
SOURCES: dict[str, tuple[object, int, Sequence[str]]] = {
    "a": (LORA, 1, SENTIMENT),
    "b": (LORA, 2, SENTIMENT),
    "topics": (LORA, 3, TOPICS),
    "houlsby": ("houlsby", 4, SENTIMENT),
    "houlsby2": ("houlsby", 5, SENTIMENT),
    "ia3": ("ia3", 6, SENTIMENT),
    "ia3b": ("ia3", 7, SENTIMENT),
    "bitfit": ("bitfit", 8, SENTIMENT),
    "bitfit2": ("bitfit", 9, SENTIMENT),
}


def make_source(
    base: str,
    out: Path,
    method: object,
    *,
    seed: int,
    labels: Sequence[str] | None = SENTIMENT,
    task: str = "single_label",
) -> Path:
    """An adapter folder as a run saves one, its trainable tensors moved from their start."""
    kind = "causal_lm" if labels is None else task
    model = load_model(base, kind, label_names=labels, seed=seed).model  # type: ignore[arg-type]
    handle = adaptlab.adapt(model, method, seed=seed, train_head=labels is not None)
    generator = torch.Generator().manual_seed(100 + seed)
    with torch.no_grad():
        for tensor in handle.tensors().values():
            tensor.add_(0.2 * torch.randn(tensor.shape, generator=generator))
    save_adapter(model, out, base_model_id=base, task=task, label_names=labels or ())
    return out


def logits(folder: Path, base: str, head: str | None = None) -> torch.Tensor:
    loaded, _ = load_trained(folder, model=base, head=head)
    with torch.no_grad():
        return loaded.model(**tiny_inputs()).logits


def saved(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The running adapter's saved tensors, by their names in its file (without its name)."""
    handle = adaptlab.get_handle(model)
    return {k.replace(f".{handle.name}.", "."): t for k, t in handle.saved_tensors().items()}


def make_sources(base: str, folder: Path, names: Iterable[str]) -> dict[str, Path]:
    """The named sources of `SOURCES`, each in a folder of its name under `folder`."""
    return {
        name: make_source(base, folder / name, method, seed=seed, labels=labels)
        for name in names
        for method, seed, labels in [SOURCES[name]]
    }


def combined_heads(base: str, folder: Path, **options: Any) -> Path:
    """Two LoRA sources with different labels combined with `options`: a folder with two
    heads, `sentiment` and `topics`."""
    lora = {"lora": {"rank": 2}}
    sentiment = make_source(base, folder / "sentiment", lora, seed=1)
    topics = make_source(base, folder / "topics", lora, seed=2, labels=TOPICS)
    return adaptlab.combine_adapters([sentiment, topics], folder / "both", model=base, **options)


@pytest.fixture(scope="module")
def sources(tiny_model_dir: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_sources(tiny_model_dir, tmp_path_factory.mktemp("sources"), SOURCES)


@pytest.mark.parametrize("how", ["linear", "cat", "svd"])
def test_a_weight_of_one_and_zero_gives_back_the_first_adapter(
    how: str, sources: dict[str, Path], tiny_model_dir: str, tmp_path: Path
) -> None:
    out = adaptlab.combine_adapters(
        [sources["a"], sources["b"]], tmp_path / "c", weights=[1, 0], how=how, model=tiny_model_dir
    )
    expected = logits(sources["a"], tiny_model_dir)
    assert torch.allclose(logits(out, tiny_model_dir), expected, atol=1e-5)


@pytest.mark.parametrize("how", ["linear", "cat", "peft_linear"])
def test_subtracting_an_adapter_from_its_copy_leaves_the_base(
    how: str, sources: dict[str, Path], tiny_model_dir: str, tmp_path: Path
) -> None:
    copy = shutil.copytree(sources["a"], tmp_path / "copy")
    out = adaptlab.combine_adapters(
        [sources["a"], copy],
        tmp_path / "c",
        weights=[1, -1],
        how=how,
        names=["plus", "minus"],
        model=tiny_model_dir,
    )
    loaded, _ = load_trained(out, model=tiny_model_dir)
    with torch.no_grad(), adaptlab.disabled(loaded.model) as bare:
        body = bare.base_model(**tiny_inputs()).last_hidden_state
    with torch.no_grad():
        combined = loaded.model.base_model(**tiny_inputs()).last_hidden_state
    assert torch.allclose(combined, body, atol=1e-5)
    source, _ = load_trained(sources["a"], model=tiny_model_dir)
    with torch.no_grad():  # the head is the positively weighted source's
        assert torch.equal(source.model.classifier.weight, loaded.model.classifier.weight)


def test_sources_with_other_labels_keep_their_heads_under_their_names(
    sources: dict[str, Path], tiny_model_dir: str, tmp_path: Path
) -> None:
    out = adaptlab.combine_adapters(
        [sources["a"], sources["topics"]], tmp_path / "c", weights=[1, 0], model=tiny_model_dir
    )
    manifest = read_manifest(out)
    assert set(manifest["heads"]) == {"a", "topics"} and manifest["train_head"] is False
    assert manifest["heads"]["topics"]["label_names"] == list(TOPICS)
    assert torch.allclose(
        logits(out, tiny_model_dir, head="a"), logits(sources["a"], tiny_model_dir), atol=1e-5
    )
    topics = logits(out, tiny_model_dir, head="topics")
    assert topics.shape[-1] == 3
    loaded, fitted = load_trained(out, model=tiny_model_dir, head="topics")
    assert fitted["label_names"] == list(TOPICS)
    assert loaded.model.config.id2label == dict(enumerate(TOPICS))
    with pytest.raises(AdaptlabError, match="choose one with --head, e.g. --head a"):
        load_trained(out, model=tiny_model_dir)
    with pytest.raises(AdaptlabError, match="has no head 'sport'; its heads: a, topics"):
        load_trained(out, model=tiny_model_dir, head="sport")


def test_the_manifest_records_the_sources_and_the_combination(
    sources: dict[str, Path], tiny_model_dir: str, tmp_path: Path
) -> None:
    out = adaptlab.combine_adapters(
        [sources["a"], sources["b"]],
        tmp_path / "c",
        weights=[0.7, 0.3],
        how="dare_ties_svd",
        density=0.5,
        rank=2,
        seed=3,
        model=tiny_model_dir,
    )
    manifest = read_manifest(out)
    combination = manifest["combined"]["combination"]
    assert combination["how"] == "dare_ties_svd" and combination["density"] == 0.5
    assert combination["rank"] == 2 and combination["seed"] == 3
    assert [s["weight"] for s in manifest["combined"]["sources"]] == [0.7, 0.3]
    first = read_manifest(sources["a"])
    assert manifest["combined"]["sources"][0]["sha256"] == first["tensors"]["sha256"]
    assert manifest["methods"][0]["config"]["rank"] == 2
    assert manifest["methods"][0]["config"]["alpha"] == 2.0
    assert manifest["label_names"] == list(SENTIMENT) and manifest["train_head"] is True


def test_bottleneck_adapters_average_and_refuse_ties(
    sources: dict[str, Path], tiny_model_dir: str, tmp_path: Path
) -> None:
    pair = [sources["houlsby"], sources["houlsby2"]]
    out = adaptlab.combine_adapters(pair, tmp_path / "c", model=tiny_model_dir)
    loaded, _ = load_trained(out, model=tiny_model_dir)
    first, _ = load_trained(pair[0], model=tiny_model_dir)
    second, _ = load_trained(pair[1], model=tiny_model_dir)

    def inserted(model: torch.nn.Module) -> dict[str, torch.Tensor]:
        return saved(model)

    one, two = inserted(first.model), inserted(second.model)
    for name, tensor in inserted(loaded.model).items():
        assert torch.allclose(tensor, (one[name] + two[name]) / 2, atol=1e-6)
    with pytest.raises(AdaptlabError, match="houlsby starts from seeded random weights"):
        adaptlab.combine_adapters(
            pair, tmp_path / "d", how="ties", density=0.5, model=tiny_model_dir
        )
    assert not (tmp_path / "d").exists()


def test_ia3_and_bitfit_combine_their_changes_from_a_common_start(
    sources: dict[str, Path], tiny_model_dir: str, tmp_path: Path
) -> None:
    out = adaptlab.combine_adapters(
        [sources["ia3"], sources["ia3b"]], tmp_path / "i", weights=[1, 1], model=tiny_model_dir
    )
    scales = {}
    for name in ("ia3", "ia3b"):
        loaded, _ = load_trained(sources[name], model=tiny_model_dir)
        scales[name] = saved(loaded.model)
    combined, _ = load_trained(out, model=tiny_model_dir)
    for name, tensor in saved(combined.model).items():
        if name.endswith(".scale"):  # 1 + (l1 - 1) + (l2 - 1)
            assert torch.allclose(tensor, scales["ia3"][name] + scales["ia3b"][name] - 1, atol=1e-6)
    ties = adaptlab.combine_adapters(
        [sources["bitfit"], sources["bitfit2"]],
        tmp_path / "b",
        how="ties",
        density=1.0,
        weights=[1, 1],
        model=tiny_model_dir,
    )
    assert read_manifest(ties)["combined"]["combination"]["how"] == "ties"


def test_the_command_writes_a_folder_that_eval_and_export_take(
    sources: dict[str, Path],
    tiny_model_dir: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "c"
    code, printed, err = run_cli(
        [
            "combine",
            "--adapters",
            f"{sources['a']},{sources['b']}",
            "--how",
            "dare_ties",
            "--density",
            "0.5",
            "--seed",
            "1",
            "--out",
            str(out),
            "--model",
            tiny_model_dir,
        ],
        capsys,
    )
    assert code == 0, err
    assert f"wrote {out} (dare_ties of 2 adapters)" in printed
    code, _, err = run_cli(
        ["export", "--adapter", str(out), str(tmp_path / "peft"), "--model", tiny_model_dir],
        capsys,
    )
    assert code == 0, err
    config = json.loads((tmp_path / "peft" / "adapter_config.json").read_text())
    assert config["r"] == 4 and config["lora_alpha"] == 4


def test_loras_of_other_layers_and_doras_combine(tiny_model_dir: str, tmp_path: Path) -> None:
    values = make_source(tiny_model_dir, tmp_path / "v", {"lora": {"targets": ["value"]}}, seed=1)
    keys = make_source(tiny_model_dir, tmp_path / "k", {"lora": {"targets": ["key"]}}, seed=2)
    out = adaptlab.combine_adapters([values, keys], tmp_path / "c", how="cat", model=tiny_model_dir)
    config = read_manifest(out)["methods"][0]["config"]
    assert config["targets"] == ["key", "value"] and config["rank"] == 16
    weights = {
        name: saved(load_trained(f, model=tiny_model_dir)[0].model)
        for name, f in (("v", values), ("k", keys), ("c", out))
    }
    for name, a in weights["c"].items():
        if name.endswith(".A"):  # the layer's one source first (PEFT's rule), then zeros
            source = weights["v"] if ".value." in name else weights["k"]
            assert torch.allclose(a[:8], 0.5 * source[name], atol=1e-6)
            assert not a[8:].any()
    dora = {"lora": {"rank": 2, "dora": True}}
    doras = [make_source(tiny_model_dir, tmp_path / f"d{i}", dora, seed=i) for i in (1, 2)]
    combined = adaptlab.combine_adapters(
        doras, tmp_path / "dc", how="svd", weights=[1, 1], model=tiny_model_dir
    )
    model = load_trained(combined, model=tiny_model_dir)[0].model
    starts = {n: p for n, p in saved(load_trained(doras[0], model=tiny_model_dir)[0].model).items()}
    second = saved(load_trained(doras[1], model=tiny_model_dir)[0].model)
    for name, magnitude in saved(model).items():
        if name.endswith(".magnitude"):
            layer = model.get_submodule(name.split(".adaptlab")[0])
            start = torch.linalg.vector_norm(layer.weight, dim=1)
            expected = starts[name] + second[name] - start
            assert torch.allclose(magnitude, expected, atol=1e-5)


def test_lora_on_gpt2s_fused_layer_combines_part_by_part(tmp_path: Path) -> None:
    """On GPT-2's c_attn each part (query, value) is its own pair: cat with weights 1 and 1 is
    exactly the two adapters stacked, their updates summed."""
    from tiny_models import save_family

    base = save_family(str(tmp_path / "gpt2"), "gpt2")
    folders = [make_source(base, tmp_path / n, "lora", seed=s, labels=None, task="causal-lm")
               for n, s in (("a", 1), ("b", 2))]  # fmt: skip
    out = adaptlab.combine_adapters(folders, tmp_path / "c", weights=[1, 1], how="cat", model=base)
    stacked = load_model(base, "causal_lm").model.eval()
    for name, folder in zip("ab", folders, strict=True):
        adaptlab.load_adapter(stacked, folder, name=name, activate=False)
    adaptlab.set_active(stacked, adaptlab.Stack("a", "b"))
    with torch.no_grad():
        expected = stacked(**tiny_inputs()).logits
    assert (logits(out, base) - expected).abs().max().item() <= 1e-5

"""A combined folder is untrusted input like any adapter folder: its `combined` and `heads`
fields and its head files are checked, every bad edit one line; eval takes `--head`."""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_cases import refused, run_cli
from test_combine import SENTIMENT, TOPICS, combined_heads, make_source

from adaptlab.engine.restore import load_trained
from adaptlab.errors import AdaptlabError


@pytest.fixture(scope="module")
def combined(tiny_model_dir: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two LoRA sources with different labels combined by TIES: a folder with two heads."""
    folder = tmp_path_factory.mktemp("combined")
    return combined_heads(tiny_model_dir, folder, how="ties", density=0.5, weights=[0.5, 0.5])


def edited(combined: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    copy = Path(shutil.copytree(combined, tmp_path / "copy"))
    manifest = json.loads((copy / "manifest.json").read_text())
    edit(manifest)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m["combined"]["combination"].update(how="soup"), "combined.combination"),
        (lambda m: m["combined"]["combination"].update(density=7), "combined.combination"),
        (lambda m: m["combined"].update(sources=[]), "sources must be a non-empty list"),
        (lambda m: m["combined"]["sources"][0].update(weight="x"), "weight must be a finite"),
        (lambda m: m["combined"]["sources"][0].update(name="../a"), "name must be an adapter name"),
        (lambda m: m["combined"]["sources"].pop(), "one weight per source"),
        (lambda m: m["combined"].update(extra=1), "an object of combination and sources"),
        (lambda m: m["heads"].update({"../x": m["heads"]["topics"]}), "is not an adapter name"),
        (lambda m: m["heads"].pop("topics"), "at least two heads"),
        (lambda m: m["heads"]["topics"].update(bytes=-1), "bytes must be a positive integer"),
        (lambda m: m["heads"]["topics"].update(task="poetry"), "unknown task .poetry."),
        (lambda m: m["heads"]["topics"].update(sha256="0" * 64), "do not match the manifest"),
        (lambda m: m["heads"]["topics"].update(label_names=["x", "x"]), "distinct labels"),
        (lambda m: m.update(train_head=True), "train_head must be false"),
    ],
)
def test_bad_edits_of_a_combined_manifest_are_one_line(
    combined: Path,
    tiny_model_dir: str,
    tmp_path: Path,
    edit: Callable[[dict[str, Any]], None],
    message: str,
) -> None:
    folder = edited(combined, tmp_path, edit)
    with pytest.raises(AdaptlabError, match=message) as error:
        load_trained(folder, model=tiny_model_dir, head="topics")
    assert "\n" not in str(error.value)


def test_an_edited_head_file_is_refused(
    combined: Path, tiny_model_dir: str, tmp_path: Path
) -> None:
    copy = Path(shutil.copytree(combined, tmp_path / "copy"))
    head = copy / "heads" / "topics.safetensors"
    data = bytearray(head.read_bytes())
    data[-1] ^= 1
    head.write_bytes(bytes(data))
    with pytest.raises(AdaptlabError, match="contents do not match the manifest"):
        load_trained(copy, model=tiny_model_dir, head="topics")
    head.unlink()
    with pytest.raises(AdaptlabError, match="missing; the adapter folder is incomplete"):
        load_trained(copy, model=tiny_model_dir, head="topics")


def test_eval_and_predict_take_a_head(
    combined: Path, tiny_model_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "topics.csv"
    with data.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        for i in range(60):
            writer.writerow([f"text number {i}", TOPICS[i % 3]])
    args = ["eval", "--adapter", str(combined), "--data", str(data), "--model", tiny_model_dir]
    code, printed, err = run_cli([*args, "--head", "topics", "--split", "test", "--json"], capsys)
    assert code == 0, err
    assert "accuracy" in json.loads(printed)
    refused(args, capsys, "keeps the heads of 2 sources", "--head sentiment")
    base = ["eval", "--model", tiny_model_dir, "--data", str(data), "--head", "topics"]
    refused(base, capsys, "--head picks the head of a combined adapter: give --adapter")
    refused([*args, "--head", "sentiment"], capsys, "label")
    texts = tmp_path / "texts.txt"
    texts.write_text("a film\n")
    predict = ["predict", "--adapter", str(combined), "--input", str(texts)]
    code, printed, err = run_cli(
        [*predict, "--model", tiny_model_dir, "--head", "sentiment"], capsys
    )
    assert code == 0, err
    assert printed.split("\t")[0] in SENTIMENT


def test_serve_offers_each_head_as_an_adapter(
    combined: Path, tiny_model_dir: str, tmp_path: Path
) -> None:
    pytest.importorskip("fastapi")
    from adaptlab.serve import AdapterService, ServeOptions

    registry = tmp_path / "registry"
    shutil.copytree(combined, registry / "both")
    service = AdapterService(ServeOptions(model=tiny_model_dir, adapters=str(registry)))
    try:
        entries = service.registry.entries
        assert set(entries) == {"both-sentiment", "both-topics"}
        assert entries["both-topics"].labels == TOPICS
        topics = service.predict("both-topics", ["a film"]).result(timeout=60)
        sentiment = service.predict("both-sentiment", ["a film"]).result(timeout=60)
    finally:
        service.close()
    assert topics[0].label in TOPICS and sentiment[0].label in SENTIMENT


def test_adapters_show_tells_how_it_was_combined_and_its_heads(
    combined: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, printed, err = run_cli(["adapters", "show", str(combined)], capsys)
    assert code == 0, err
    assert "combined by ties (density 0.5) of sentiment (weight 0.5, single_label" in printed
    assert "heads (choose one with --head): sentiment: single_label, negative, positive" in printed
    code, printed, err = run_cli(["adapters", "show", str(combined), "--json"], capsys)
    rows = json.loads(printed)
    assert rows[0]["combined"]["combination"]["how"] == "ties"
    assert set(rows[0]["heads"]) == {"sentiment", "topics"}


def test_sources_of_other_bases_are_refused_naming_both(
    tiny_model_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = make_source(tiny_model_dir, tmp_path / "one", "lora", seed=1)
    other = Path(shutil.copytree(first, tmp_path / "other"))
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["base_model"]["fingerprint"] = "0123456789abcdef"
    (other / "manifest.json").write_text(json.dumps(manifest))
    refused(
        [
            "combine",
            "--adapters",
            f"{first},{other}",
            "--out",
            str(tmp_path / "c"),
            "--model",
            tiny_model_dir,
        ],
        capsys,
        str(first),
        str(other),
        "were trained on different base models (fingerprints",
    )


def test_a_head_file_holding_a_body_tensor_is_refused(
    combined: Path, tiny_model_dir: str, tmp_path: Path
) -> None:
    import hashlib

    import safetensors.torch

    copy = Path(shutil.copytree(combined, tmp_path / "copy"))
    head = copy / "heads" / "topics.safetensors"
    tensors = safetensors.torch.load(head.read_bytes())
    body = safetensors.torch.load((copy / "adapter.safetensors").read_bytes())
    name, tensor = next(iter(body.items()))
    data = safetensors.torch.save({**tensors, name.replace(".adaptlab_lora.", "."): tensor})
    head.write_bytes(data)

    def rewrite(manifest: dict[str, Any]) -> None:
        entry = manifest["heads"]["topics"]
        entry.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))

    manifest = json.loads((copy / "manifest.json").read_text())
    rewrite(manifest)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(AdaptlabError, match="which is no head tensor"):
        load_trained(copy, model=tiny_model_dir, head="topics")

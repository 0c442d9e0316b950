"""`adaptlab rank` on damaged or conflicting inputs: a feature cache entry cut short, emptied,
missing its tensors or holding other examples' features is a miss (the features are extracted
again and the entry rewritten), an entry that cannot be written is one line; `--write-controls`
with `--json` or `--validate` (which it would ignore) and a bad `--pooling` are one line naming
the option. Every refusal exits 1 with inputs unchanged byte for byte and nothing written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_cases import refused, run_cli, unchanged, write_reviews
from safetensors.numpy import load_file, save_file

Damage = Callable[[Path], None]


def rank_args(model: str, data: Path, out: Path) -> list[str]:
    return [
        "rank", "--models", model, "--data", str(data), "--sample", "40", "--estimators",
        "logme,knn", "--device", "cpu", "--no-progress", "--json", str(out),
    ]  # fmt: skip


def ranked(args: list[str], capsys: pytest.CaptureFixture[str], out: Path) -> dict[str, Any]:
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    return dict(json.loads(out.read_text())["ranking"])


def cut_short(entry: Path) -> None:
    entry.write_bytes(entry.read_bytes()[:100])


def emptied(entry: Path) -> None:
    entry.write_bytes(b"")


def without_features(entry: Path) -> None:
    save_file({"labels": load_file(entry)["labels"]}, entry)


def other_examples(entry: Path) -> None:
    tensors = load_file(entry)
    save_file({"hidden": tensors["hidden"], "labels": 1 - tensors["labels"]}, entry)


def not_finite(entry: Path) -> None:
    tensors = load_file(entry)
    save_file(
        {"hidden": np.full_like(tensors["hidden"], np.nan), "labels": tensors["labels"]}, entry
    )


@pytest.mark.parametrize(
    "damage", [cut_short, emptied, without_features, other_examples, not_finite]
)
def test_a_damaged_cache_entry_is_extracted_again(
    damage: Damage,
    tiny_model_dir: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    feature_cache: Path,
) -> None:
    data = write_reviews(tmp_path / "data" / "reviews.csv")
    out = tmp_path / "rank.json"
    first = ranked(rank_args(tiny_model_dir, data, out), capsys, out)
    (entry,) = (feature_cache / "features").glob("*.safetensors")
    written = entry.read_bytes()
    damage(entry)
    with unchanged(tmp_path / "data"), unchanged(Path(tiny_model_dir)):
        again = ranked(rank_args(tiny_model_dir, data, out), capsys, out)
    assert again["cache_hits"] == 0
    for row, before in zip(again["rows"], first["rows"], strict=True):
        assert row["scores"] == pytest.approx(before["scores"], rel=1e-6)
    assert set(load_file(entry)) == {"hidden", "labels"} and len(entry.read_bytes()) == len(written)
    assert ranked(rank_args(tiny_model_dir, data, out), capsys, out)["cache_hits"] == 1


def test_a_cache_entry_that_cannot_be_written_is_one_line(
    tiny_model_dir: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    feature_cache: Path,
) -> None:
    data = write_reviews(tmp_path / "reviews.csv")
    out = tmp_path / "rank.json"
    ranked(rank_args(tiny_model_dir, data, out), capsys, out)
    (entry,) = (feature_cache / "features").glob("*.safetensors")
    entry.unlink()
    entry.mkdir()  # what stands where the entry goes is no file
    out.unlink()
    with unchanged(tmp_path):
        refused(
            rank_args(tiny_model_dir, data, out), capsys,
            f"cannot write the feature cache entry {entry}", "remove it, or set ADAPTLAB_CACHE",
        )  # fmt: skip


@pytest.mark.parametrize("option", ["--json", "--validate"])
def test_write_controls_with_an_option_it_would_ignore_is_one_line(
    option: str, tiny_model_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = tmp_path / ("rank.json" if option == "--json" else "study.db")
    args = ["rank", "--models", f"{tiny_model_dir}@reinit", "--write-controls"]
    with unchanged(tmp_path), unchanged(Path(tiny_model_dir)):
        refused(
            [*args, str(tmp_path / "controls"), option, str(given)], capsys,
            f"--write-controls only writes the candidates as model folders and ranks nothing, "
            f"so {option} {given} would be ignored",
        )  # fmt: skip
    assert not (tmp_path / "controls").exists()


def test_a_bad_pooling_names_the_pooling_alone(
    tiny_model_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_reviews(tmp_path / "reviews.csv")
    args = ["rank", "--models", tiny_model_dir, "--data", str(data), "--pooling", "max"]
    with unchanged(tmp_path):
        line = refused(args, capsys, "--pooling is one of mean, first, got 'max'")
    assert "--aggregate" not in line

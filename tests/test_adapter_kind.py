"""`combine` and `train --stack` ask one question of an adapter, what class of model it loads
onto, and get one answer (`adaptlab.methods.adapter_kind`): the base class its manifest
records. Each command keeps its own refusal, one line, every file left as it was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_cases import refused, unchanged, write_reviews
from test_combine import make_source

import adaptlab
from adaptlab.engine.run_checks import check_frozen_adapters
from adaptlab.errors import ConfigError
from adaptlab.methods.adapter_kind import adapter_kind, trained_as
from adaptlab.methods.manifest import parse_manifest
from adaptlab.records.spec import RunSpec


@pytest.fixture(scope="module")
def sources(tiny_model_dir: str, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two single_label LoRA adapters of the tiny BERT."""
    folder = tmp_path_factory.mktemp("sources")
    lora = {"lora": {"rank": 2}}
    return [make_source(tiny_model_dir, folder / name, lora, seed=i) for i, name in enumerate("ab")]


def as_class(folder: Path, target: Path, model_class: str) -> Path:
    """A copy of adapter `folder` whose manifest records its base as `model_class`."""
    copy = Path(shutil.copytree(folder, target))
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["base_model"]["class"] = model_class
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


def test_a_classifiers_adapter_loads_as_a_sequence_classifier(sources: list[Path]) -> None:
    manifest = parse_manifest(sources[0])
    assert manifest.base_model.model_class == "BertForSequenceClassification"
    assert adapter_kind(manifest) == "single_label"
    assert all(trained_as(manifest, kind) for kind in ("single_label", "multi_label", "regression"))
    assert not any(trained_as(manifest, kind) for kind in ("token", "masked_lm", "causal_lm"))


def test_stack_takes_an_adapter_of_the_runs_class_and_refuses_another(
    sources: list[Path], tiny_model_dir: str
) -> None:
    def spec(task: str) -> RunSpec:
        stack = (str(sources[0]),)
        return RunSpec.build(
            tiny_model_dir, "d.csv", "houlsby", data_options={"task": task}, stack=stack
        )

    check_frozen_adapters(spec("regression"))  # one sequence classifier: no refusal
    with pytest.raises(ConfigError) as error:
        check_frozen_adapters(spec("token"))
    assert str(error.value).startswith(
        f"--stack {sources[0]} is a single_label adapter, trained as a "
        "BertForSequenceClassification; this token run trains a token model"
    )


def test_a_class_of_no_kind_is_refused_by_both_commands(
    sources: list[Path], tiny_model_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = [as_class(s, tmp_path / s.name, "BertModel") for s in sources]
    data = write_reviews(tmp_path / "reviews.csv")
    train = ["train", "--data", str(data), "--method", "houlsby", "--stack", str(bare[0])]
    with unchanged(tmp_path):
        with pytest.raises(ConfigError) as error:
            adaptlab.combine_adapters(bare, tmp_path / "both", model=tiny_model_dir)
        assert str(error.value) == (
            f"{bare[0]}: its base is a BertModel, whose head adaptlab cannot load"
        )
        line = refused(
            [*train, "--model", tiny_model_dir, "--out", str(tmp_path / "out")],
            capsys,
            f"--stack {bare[0]} is a single_label adapter, trained as a BertModel",
        )
    assert "this labelled run trains a" in line
    assert not (tmp_path / "both").exists() and not (tmp_path / "out").exists()

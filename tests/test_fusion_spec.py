"""Fusion is a field of the run spec, not a registered method: how users write it, how records
keep writing it, and what the method registry says of itself."""

from __future__ import annotations

import importlib
import json

import pytest
from cli_cases import run_cli
from tiny_models import tiny_model

import adaptlab
from adaptlab.errors import ConfigError
from adaptlab.methods.configs.fusion import FusionConfig
from adaptlab.methods.registry import METHODS, get_method, make_config
from adaptlab.records.spec import RunSpec


@pytest.mark.parametrize(
    "method",
    ["fusion", {"fusion": {"temperature": 2}}, [{"fusion": {"temperature": 2}}], FusionConfig()],
)
def test_fusion_as_users_write_it_becomes_the_spec_field(method: object) -> None:
    spec = RunSpec.build("m", "d", method, fuse=("runs/a", "runs/b"))  # type: ignore[arg-type]
    assert spec.methods == () and isinstance(spec.fusion, FusionConfig)
    assert spec.trained_configs == (spec.fusion,)
    assert spec.learning_rate() == FusionConfig.default_learning_rate


def test_a_fusion_spec_writes_fusion_as_its_method_and_reads_back() -> None:
    spec = RunSpec.build("m", "d", {"fusion": {"temperature": 2}}, fuse=("runs/a", "runs/b"))
    written = spec.to_dict()
    assert written["methods"] == [
        {
            "name": "fusion",
            "config": {"temperature": 2, "value_regularization": 0.01, "init_std": 0.02},
        }
    ]
    assert written["fuse"] == ["runs/a", "runs/b"] and "fusion" not in written
    again = RunSpec.from_dict(json.loads(json.dumps(written)))
    assert again.fusion == spec.fusion and again.methods == () and again.fuse == spec.fuse
    assert again.to_dict() == written


def test_a_stored_fusion_key_is_refused() -> None:
    written = RunSpec.build("m", "d", "lora").to_dict()
    with pytest.raises(ConfigError, match="fusion: unknown field"):
        RunSpec.from_dict({**written, "fusion": {"temperature": 2}})


def test_fusion_and_methods_in_one_spec_are_refused() -> None:
    with pytest.raises(ConfigError, match="in a spec without methods"):
        RunSpec("m", "d", (make_config("lora"),), fusion=FusionConfig(), fuse=("runs/a",))
    with pytest.raises(ConfigError, match="needs the adapters to fuse"):
        RunSpec("m", "d", (), fusion=FusionConfig())


@pytest.mark.parametrize("method", ["fusion", "lora+fusion", {"fusion": {}, "lora": {}}])
def test_fusion_is_no_method_of_an_adapter(method: object) -> None:
    with pytest.raises(ConfigError, match="fusion is not one of its methods") as error:
        adaptlab.add_adapter(tiny_model("bert"), "a", method)  # type: ignore[arg-type]
    assert "--adapters" in str(error.value) and "\n" not in str(error.value)


def test_the_registry_holds_methods_only_and_says_what_each_supports() -> None:
    assert "fusion" not in METHODS and "fusion" not in METHODS.names()
    with pytest.raises(ConfigError, match="add_fusion"):
        get_method("fusion")
    assert METHODS.names(lambda method: method.exclusive) == ["full", "head", "lst"]
    assert METHODS.names(lambda method: method.mergeable) == ["lora", "ia3"]
    assert all(callable(importlib.import_module(m.apply_module).apply) for m in METHODS)
    listed = adaptlab.list_methods()
    assert listed[-1].name == "fusion" and listed[-1].config_class is FusionConfig


def test_merging_an_adapter_with_nothing_to_merge_names_the_mergeable_methods() -> None:
    model = tiny_model("bert")
    adaptlab.adapt(model, "houlsby")
    with pytest.raises(ConfigError, match="mergeable methods: lora, ia3"):
        adaptlab.merge(model)


def test_the_methods_command_lists_fusion_apart_with_its_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, stdout, _ = run_cli(["methods"], capsys)
    assert code == 0
    methods, over = stdout.split("trained over adapters")
    assert "fusion" not in methods
    assert "fusion" in over and "temperature=1.0" in over and "value_regularization=0.01" in over
    assert "combines, merges" in methods and "alone" in methods


def test_the_method_help_is_made_from_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = run_cli(["train", "--help"], capsys)
    assert code == 0
    text = " ".join(stdout.replace("│", " ").split())
    assert all(name in text for name in METHODS.names())
    assert "(full, head, lst stand alone); or fusion, over --adapters" in text

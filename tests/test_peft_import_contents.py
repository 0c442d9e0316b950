"""`adaptlab import --format peft` checks what a PEFT folder holds: target_modules that name
modules of the model and exactly the modules the file has LoRA pairs for, finite tensors of the
dtypes adapters are saved in, config fields it knows, bounded JSON. Each refusal is one line,
exit 1, nothing written and nothing changed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_cases import run_cli
from peft_helpers import LABELS, edited, give_lora_pairs_values, import_args, import_refused
from tiny_models import save_tiny_bert

import adaptlab
from adaptlab.methods.peft_config import CONFIG_FILE
from adaptlab.methods.peft_format import TENSOR_FILE, export_peft
from adaptlab.models.loading import load_model


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny model folder and a PEFT LoRA folder (query and value of every block) made on it."""
    root = tmp_path_factory.mktemp("peft-contents")
    model = Path(save_tiny_bert(str(root / "tiny-bert")))
    loaded = load_model(str(model), "single_label", label_names=LABELS.split(","), seed=0)
    adaptlab.adapt(loaded.model, "lora", targets=("query", "value"))
    give_lora_pairs_values(loaded.model)
    export_peft(loaded.model, root / "peft", base_model_id=str(model))
    return {"root": root, "model": model, "peft": root / "peft"}


def targets(value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda config: config.update(target_modules=value)


def test_target_modules_that_match_no_module_are_refused(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """PEFT's best-known complaint: an adapter whose targets name nothing does nothing."""
    source = edited(setup, tmp_path, targets(["q_proj", "v_proj"]))
    line = import_refused(
        setup, source, capsys, str(source / CONFIG_FILE), "'q_proj', 'v_proj'", "match no module"
    )
    assert "'query'" in line and "'value'" in line  # a few names that exist


@pytest.mark.parametrize(
    ("value", "needles"),
    [
        (".*\\.q_proj", ("target_modules '.*\\\\.q_proj' matches no module",)),
        ("(", ("not a regular expression",)),
        ([], ("target_modules must be a list of module names",)),
        ([1, 2], ("target_modules must be a list of module names",)),
        (None, ("target_modules must be a list of module names",)),
    ],
)
def test_target_modules_of_the_wrong_kind_are_refused(
    value: Any,
    needles: tuple[str, ...],
    setup: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = edited(setup, tmp_path, targets(value))
    import_refused(setup, source, capsys, str(source / CONFIG_FILE), *needles)


def test_a_target_without_a_lora_pair_is_refused(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = edited(setup, tmp_path, lambda c: c["target_modules"].append("key"))
    import_refused(setup, source, capsys, "target_modules names", ".key'", "no LoRA pair for it")


def test_a_lora_pair_no_target_names_is_refused(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = edited(setup, tmp_path, targets(".*value"))
    import_refused(setup, source, capsys, "LoRA pair for", ".query'", "does not name")


def test_head_tensors_outside_modules_to_save_are_refused(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = edited(setup, tmp_path, lambda c: c.update(modules_to_save=None))
    import_refused(setup, source, capsys, "neither a LoRA pair nor in a module", "modules_to_save")


def test_regular_expressions_and_short_names_that_match_import(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """PEFT's matching: a string is a regular expression over whole names, a list entry a whole
    name or its last parts; entries for another architecture's layers may sit beside them (a
    list written for several models), and an unknown field that is off is accepted."""
    for name, edit in {
        "pattern": targets(".*\\.(query|value)"),
        "short": targets(["query", "value", "q_proj"]),
        "later-field": lambda c: c.update(some_later_option=None),
    }.items():
        source = edited(setup, tmp_path / name, edit)
        code, out, err = run_cli(import_args(setup["model"], source, "--labels", LABELS), capsys)
        assert code == 0 and "wrote" in out, err


def value(number: float) -> Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]:
    return lambda tensors: {n: torch.full_like(t, number) for n, t in tensors.items()}


@pytest.mark.parametrize(
    ("edit", "needles"),
    [
        (value(float("nan")), ("holds NaN",)),
        (value(float("-inf")), ("holds an infinite value",)),
        (value(1e38), ("trained weights stay under 1,000,000",)),
        (lambda ts: {n: t.double() for n, t in ts.items()}, ("is float64",)),
        (lambda ts: {n: t.long() for n, t in ts.items()}, ("is int64",)),
    ],
    ids=["nan", "infinity", "1e38", "float64", "int64"],
)
def test_tensors_a_trained_adapter_never_holds_are_refused(
    edit: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]],
    needles: tuple[str, ...],
    setup: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = edited(setup, tmp_path, tensors=edit)
    import_refused(setup, source, capsys, str(source / TENSOR_FILE), "tensor '", *needles)


def test_a_rank_the_tensors_do_not_have_is_refused(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = edited(setup, tmp_path, lambda c: c.update(r=4))
    import_refused(
        setup, source, capsys, "has shapes (8, 32) and (32, 8), where r = 4 needs (4, in)"
    )


@pytest.mark.parametrize(
    ("edit", "needles"),
    [
        (lambda c: c.update(mystery=3), ("unknown field 'mystery' set to 3",)),
        (lambda c: c.update(trainable_token_indices=[1, 2]), ("'trainable_token_indices'",)),
        (lambda c: c.update(init_lora_weights="pissa"), ("init_lora_weights='pissa'",)),
        (lambda c: c.update(modules_to_save="classifier"), ("modules_to_save must be a list",)),
    ],
    ids=["unknown", "later-option-set", "init-changing-the-base", "modules-to-save-text"],
)
def test_config_fields_adaptlab_cannot_follow_are_refused(
    edit: Callable[[dict[str, Any]], None],
    needles: tuple[str, ...],
    setup: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = edited(setup, tmp_path, edit)
    import_refused(setup, source, capsys, str(source / CONFIG_FILE), *needles)


@pytest.mark.parametrize("opening, closing", [("[", "]"), ('{"a":', "}")], ids=["lists", "objects"])
def test_a_deeply_nested_config_is_one_line(
    opening: str,
    closing: str,
    setup: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = edited(setup, tmp_path)
    (source / CONFIG_FILE).write_text(f"{opening * 100_000}1{closing * 100_000}")
    import_refused(setup, source, capsys, str(source / CONFIG_FILE), "nested 100,000 levels")

"""`linear` is the weighted sum of the sources' updates (an adapter and its copy averaged are
the adapter; LoRAs of different ranks sum exactly), and `peft_linear` is PEFT's linear, which
merges LoRA's A and B apart: both checked on saved folders, the PEFT-named hows against PEFT's
`add_weighted_adapter` in the logits."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_cases import run_cli
from test_combine import logits, make_source
from tiny_models import save_tiny_llama, tiny_inputs

import adaptlab
from adaptlab.engine.restore import load_trained
from adaptlab.errors import ConfigError
from adaptlab.methods.combination import Combination
from adaptlab.methods.lora import LoRA
from adaptlab.methods.persistence import read_manifest

ATOL = 1e-5


def updates(folder: Path, base: str) -> dict[str, torch.Tensor]:
    """Each LoRA layer's update (alpha / r) B A of the adapter saved in `folder`, by site."""
    model = load_trained(folder, model=base)[0].model
    found = {}
    for insertion in adaptlab.get_handle(model).insertions["lora"]:
        module = insertion.module
        assert isinstance(module, LoRA)
        found[insertion.site] = (module.scaling * module.B @ module.A).detach()
    return found


@pytest.fixture(scope="module")
def loras(tiny_model_dir: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A rank-4 LoRA, an exact copy of its folder, and a rank-8 LoRA of another alpha."""
    folder = tmp_path_factory.mktemp("loras")
    four = {"lora": {"rank": 4, "alpha": 8.0, "targets": ["query", "value"]}}
    eight = {"lora": {"rank": 8, "alpha": 4.0, "targets": ["query", "value"]}}
    x = make_source(tiny_model_dir, folder / "x", four, seed=1)
    return {
        "x": x,
        "copy": Path(shutil.copytree(x, folder / "copy")),
        "eight": make_source(tiny_model_dir, folder / "eight", eight, seed=2),
    }


def test_linear_of_an_adapter_and_its_copy_at_half_each_is_the_adapter(
    loras: dict[str, Path],
    tiny_model_dir: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "mean"
    adapters = f"{loras['x']},{loras['copy']}"
    args = ["combine", "--adapters", adapters, "--weights", "0.5,0.5", "--out", str(out)]
    code, _, err = run_cli([*args, "--model", tiny_model_dir], capsys)
    assert code == 0, err
    expected = updates(loras["x"], tiny_model_dir)
    combined = updates(out, tiny_model_dir)
    assert set(combined) == set(expected)
    for site, update in expected.items():
        torch.testing.assert_close(combined[site], update, atol=ATOL, rtol=0, msg=site)
    assert read_manifest(out)["methods"][0]["config"]["rank"] == 8  # the pairs stacked
    torch.testing.assert_close(
        logits(out, tiny_model_dir), logits(loras["x"], tiny_model_dir), atol=ATOL, rtol=0
    )


def test_peft_linear_of_an_adapter_and_its_copy_is_twice_the_adapter(
    loras: dict[str, Path], tiny_model_dir: str, tmp_path: Path
) -> None:
    """PEFT's rule: A and B each the sum of sqrt(0.5) A and sqrt(0.5) A, so B' A' = 2 B A."""
    out = adaptlab.combine_adapters(
        [loras["x"], loras["copy"]], tmp_path / "p", how="peft_linear", model=tiny_model_dir
    )
    expected = updates(loras["x"], tiny_model_dir)
    for site, update in updates(out, tiny_model_dir).items():
        torch.testing.assert_close(update, 2 * expected[site], atol=ATOL, rtol=0, msg=site)


@pytest.mark.parametrize("weights", [(0.7, -0.3), (0.5, 0.5)])
def test_linear_of_ranks_4_and_8_is_the_weighted_sum_of_their_updates(
    weights: tuple[float, float], loras: dict[str, Path], tiny_model_dir: str, tmp_path: Path
) -> None:
    out = adaptlab.combine_adapters(
        [loras["x"], loras["eight"]], tmp_path / "c", weights=weights, model=tiny_model_dir
    )
    four, eight = updates(loras["x"], tiny_model_dir), updates(loras["eight"], tiny_model_dir)
    combined = updates(out, tiny_model_dir)
    assert set(combined) == set(four) == set(eight)
    for site, update in combined.items():
        expected = weights[0] * four[site] + weights[1] * eight[site]
        torch.testing.assert_close(update, expected, atol=ATOL, rtol=0, msg=site)
        assert expected.abs().max() > 0.01, site
    config = read_manifest(out)["methods"][0]["config"]
    assert config["rank"] == 12 and config["alpha"] == 12.0


def test_peft_linear_refuses_ranks_4_and_8_pointing_to_linear(
    loras: dict[str, Path], tiny_model_dir: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=r"ranks 4, 8; use linear") as caught:
        adaptlab.combine_adapters(
            [loras["x"], loras["eight"]], tmp_path / "c", how="peft_linear", model=tiny_model_dir
        )
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "c").exists()


def peft_logits(
    base: str,
    folders: dict[str, Path],
    tmp_path: Path,
    combination: Combination,
) -> torch.Tensor:
    """The logits of PEFT's add_weighted_adapter over the sources exported to PEFT's format,
    with the combination_type that gives `combination`'s pairs."""
    peft = pytest.importorskip("peft")
    import transformers

    from adaptlab.methods.peft_format import export_peft

    exported = {}
    for name, folder in folders.items():
        loaded, _ = load_trained(folder, model=base)
        exported[name] = export_peft(loaded.model, tmp_path / f"peft-{name}")
    reference = transformers.AutoModelForCausalLM.from_pretrained(base)
    names = list(exported)
    wrapped = peft.PeftModel.from_pretrained(reference, str(exported[names[0]]), names[0])
    for name in names[1:]:
        wrapped.load_adapter(str(exported[name]), adapter_name=name)
    wrapped.add_weighted_adapter(
        names,
        list(combination.weights),
        "mixed",
        combination_type=combination.peft_type,
        svd_rank=combination.rank,
        density=combination.density,
    )
    wrapped.set_adapter("mixed")
    with torch.no_grad():
        return wrapped(**tiny_inputs()).logits


@pytest.mark.parametrize(
    ("how", "ranks", "options"),
    [
        ("linear", (2, 4, 2), {}),
        ("cat", (2, 4, 2), {}),
        ("svd", (2, 4, 2), {"rank": 4}),
        ("ties_svd", (2, 4, 2), {"density": 0.5}),
        ("peft_linear", (4, 4, 4), {}),
        ("ties", (4, 4, 4), {"density": 0.5}),
    ],
)
def test_causal_lm_loras_combine_as_peft_s_add_weighted_adapter_in_the_logits(
    how: str, ranks: tuple[int, ...], options: dict[str, Any], tmp_path: Path
) -> None:
    base = save_tiny_llama(str(tmp_path / "llama"))
    folders = {}
    for seed, (name, rank) in enumerate(zip(("one", "two", "three"), ranks, strict=True)):
        lora = {"lora": {"rank": rank, "alpha": 4.0 + seed, "targets": ["query", "value"]}}
        folders[name] = make_source(base, tmp_path / name, lora, seed=seed, labels=None, task="sft")
    combination = Combination(how, (0.6, 0.5, -0.3), **options)
    out = adaptlab.combine_adapters(
        list(folders.values()),
        tmp_path / "ours",
        weights=combination.weights,
        how=how,
        model=base,
        **options,
    )
    ours = logits(out, base)
    theirs = peft_logits(base, folders, tmp_path, combination)
    assert (ours - logits(folders["one"], base)).abs().max() > 1e-3  # the combination tells
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)

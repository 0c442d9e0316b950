"""Mixed precision, the base dtype and the device a run uses: fp16 loss scaling skips a step
whose gradients overflow, what trains stays float32, a run at bf16 with a bf16 base and
checkpointing trains, records its scale and loads at float32; "auto" picks the CPU here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cli_cases import run_cli, write_reviews
from torch import nn

from adaptlab.engine.precision import Precision, keep_trained_in_float32
from adaptlab.errors import ConfigError
from adaptlab.models.device import torch_device
from adaptlab.records.scale import Scale
from adaptlab.records.spec import RunSpec
from adaptlab.study.planner import run_id


def test_fp16_loss_scaling_skips_a_step_whose_gradients_overflow() -> None:
    weight = nn.Parameter(torch.ones(4))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    precision = Precision("fp16", torch.device("cpu"))
    scale = precision.scaler.get_scale()
    overflowing = (weight * 1e34).sum()  # finite, but its gradient times the scale is not
    assert torch.isfinite(overflowing) and scale * 1e34 > torch.finfo(torch.float32).max
    assert not precision.step(overflowing, optimizer, [weight], max_grad_norm=1.0)
    assert torch.equal(weight.detach(), torch.ones(4))  # the step was skipped
    assert precision.scaler.get_scale() == scale / 2 and precision.skipped == 1
    assert precision.step(weight.sum(), optimizer, [weight], max_grad_norm=1.0)
    assert (weight.detach() < 1).all()  # an ordinary step moves the weight


def test_bf16_and_fp32_steps_never_scale() -> None:
    for name in ("fp32", "bf16"):
        assert not Precision(name, torch.device("cpu")).scaler.is_enabled()


def test_what_trains_is_float32_beside_a_half_precision_base() -> None:
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 2)).to(torch.bfloat16)
    model[0].requires_grad_(False)
    trainable = keep_trained_in_float32(model)
    assert [name for name, _ in trainable] == ["1.weight", "1.bias"]
    assert all(p.dtype == torch.float32 for _, p in trainable)
    assert model[0].weight.dtype == torch.bfloat16


def test_auto_picks_the_cpu_here_and_keeps_float32_run_ids() -> None:
    assert torch_device("auto").type == "cpu"
    spec = RunSpec.build("m", "d.csv", "lora")
    assert spec.device == "cpu" and spec.scale == Scale()
    assert "scale" not in spec.to_dict()  # float32 runs keep the ids they had
    explicit = RunSpec.build("m", "d.csv", "lora", device="cpu", scale=Scale())
    assert run_id(spec) == run_id(explicit)
    bf16 = RunSpec.build("m", "d.csv", "lora", scale=Scale("bf16", gradient_checkpointing=True))
    assert bf16.to_dict()["scale"]["precision"] == "bf16" and run_id(bf16) != run_id(spec)
    assert RunSpec.from_dict(bf16.to_dict()).scale == bf16.scale


@pytest.mark.parametrize(
    ("settings", "needle"),
    [
        ({"precision": "fp8"}, "precision must be one of auto, fp32, bf16, fp16"),
        ({"base_dtype": "bf16", "precision": "fp32"}, "use --precision bf16"),
        ({"quantize": "nf3"}, "quantize must be one of nf4, int8"),
    ],
)
def test_a_scale_out_of_range_is_one_line(settings: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        Scale(**settings)


def test_half_precision_run_trains_records_its_scale_and_loads_at_float32(
    tiny_model_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_reviews(tmp_path / "reviews.csv")
    out = tmp_path / "run"
    args = ["train", "--model", tiny_model_dir, "--data", str(data), "--method", "lora"]
    args += ["--epochs", "2", "--learning-rate", "5e-3", "--out", str(out), "--no-progress"]
    args += ["--precision", "bf16", "--base-dtype", "bf16", "--gradient-checkpointing"]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    assert "device: cpu, bf16, base bf16, checkpointing" in err
    record = json.loads((out / "metrics.json").read_text())
    assert record["spec"]["scale"]["precision"] == "bf16"
    assert record["spec"]["scale"]["gradient_checkpointing"] is True
    assert all(torch.isfinite(torch.tensor(e["train_loss"])) for e in record["epochs"])
    code, shown, err = run_cli(
        ["eval", "--adapter", str(out), "--model", tiny_model_dir, "--data", str(data)], capsys
    )
    assert code == 0, err
    assert "accuracy" in shown


def test_a_study_spec_sets_the_scale_of_every_run(tmp_path: Path) -> None:
    from study_helpers import write_spec

    from adaptlab.study.planner import plan_study
    from adaptlab.study.spec import load_spec

    data = str(write_reviews(tmp_path / "reviews.csv"))
    keys = {"methods": ["lora", "houlsby"], "precision": "bf16", "quantize": "nf4"}
    spec = load_spec(write_spec(tmp_path, "minilm-l6", data, gradient_checkpointing=True, **keys))
    planned = plan_study(spec, tmp_path)
    assert {p.spec.scale for p in planned} == {
        Scale("bf16", quantize="nf4", gradient_checkpointing=True)
    }
    assert {p.spec.device for p in planned} == {"cpu"}
    with pytest.raises(ConfigError, match="full trains the base model's weights"):
        plan_study(load_spec(write_spec(tmp_path, "minilm-l6", data, quantize="nf4")), tmp_path)
    with pytest.raises(ConfigError, match="precision"):
        load_spec(write_spec(tmp_path, "minilm-l6", data, precision="fp8"))

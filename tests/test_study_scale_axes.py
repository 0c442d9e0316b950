"""`precision` and `quantize` as axes of a study's grid: a list of values is crossed with the
other axes (LoRA against QLoRA in one study), each run's spec carries its scale and its label
names it, a spec without lists plans the ids it planned before, and a bad value is one line."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_cases import refused, run_cli, unchanged
from study_helpers import write_reviews, write_spec

from adaptlab.records.scale import Scale
from adaptlab.study.planner import plan_study
from adaptlab.study.sequence_plan import plan_sequences
from adaptlab.study.spec import load_spec
from adaptlab.study.status import study_status
from adaptlab.study.store import load_records

BUILT_IN = {"models": ["minilm-l6"], "data": ["rotten-tomatoes"], "device": "cpu"}
"""A grid of built-ins on the CPU: its ids hold on any machine."""

PINNED = {
    "runs": {
        "name": "pinned",
        "models": ["minilm-l6"],
        "data": ["rotten-tomatoes", "twitter-sentiment"],
        "sources": [
            {
                "label": "lang-en",
                "data": {"twitter-sentiment": {"task": "mlm"}},
                "method": "pfeiffer",
                "train_size": 200,
                "epochs": 1,
            }
        ],
        "methods": [
            "full",
            {"houlsby": {"hidden_size": 16}},
            {"method": "lora", "learning_rates": [1e-3, 3e-4]},
            {"method": "pfeiffer", "stack": ["lang-en"], "label": "mad-x"},
        ],
        "train_sizes": [100, None],
        "seeds": [0, 1],
        "epochs": 2,
        "device": "cpu",
    },
    "scaled": {
        "name": "scaled",
        "models": ["minilm-l6"],
        "data": ["rotten-tomatoes"],
        "methods": ["lora", "houlsby"],
        "device": "cpu",
        "precision": "bf16",
        "quantize": "nf4",
        "gradient_checkpointing": True,
    },
    "seq": {
        "name": "seq",
        "models": ["minilm-l6"],
        "sequence": ["reuters-r8", "rotten-tomatoes"],
        "methods": ["lora"],
        "strategies": ["sequential", {"replay": {"rate": 0.05}}],
        "train_sizes": [100],
        "seeds": [0, 1],
        "device": "cpu",
        "precision": "bf16",
    },
}
"""Specs without scale lists, and (count, digest of the ordered ids) of the plans they made
before `precision` and `quantize` took lists."""
PINNED_IDS = {
    "runs": (41, "d86d8ac7a0badcb1"),
    "scaled": (2, "5f3d54384f693c20"),
    "seq": (4, "734bed3e441268c4"),
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def spec_file(folder: Path, **keys: Any) -> Path:
    """`folder`/s.yaml: a study of built-ins with `keys` added or replaced."""
    path = folder / "s.yaml"
    spec = {"name": "s", **BUILT_IN, "methods": ["lora", "houlsby"], "seeds": [0, 1], **keys}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def planned(folder: Path, **keys: Any) -> list[Any]:
    """The plan (runs or sequences) of `spec_file(folder, **keys)`."""
    spec = load_spec(spec_file(folder, **keys))
    return plan_sequences(spec, folder) if spec.is_sequence else plan_study(spec, folder)


def digest(ids: list[str]) -> str:
    return hashlib.sha256(",".join(ids).encode()).hexdigest()[:16]


@pytest.mark.parametrize("name", sorted(PINNED))
def test_a_spec_without_scale_lists_plans_the_ids_it_planned_before(
    name: str, tmp_path: Path
) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(PINNED[name], sort_keys=False))
    spec = load_spec(path)
    plan = plan_sequences(spec, tmp_path) if spec.is_sequence else plan_study(spec, tmp_path)
    ids = [item.run_id for item in plan]
    assert (len(ids), digest(ids)) == PINNED_IDS[name]
    assert all(" · precision=" not in item.label for item in plan)
    assert all("quantize=" not in item.label for item in plan)


def test_both_axes_plan_the_product_with_distinct_ids_and_scales(tmp_path: Path) -> None:
    plan = planned(tmp_path, precision=["fp32", "bf16"], quantize=["none", "nf4"])
    assert len(plan) == 2 * 2 * 2 * 2  # seeds x precisions x quantisations x methods
    assert len({run.run_id for run in plan}) == len(plan)
    scales = [Scale(p, quantize=q) for p in ("fp32", "bf16") for q in (None, "nf4")]
    for seed in (0, 1):
        mine = [run for run in plan if run.spec.train.seed == seed]
        assert [run.spec.scale for run in mine] == [s for s in scales for _ in ("lora", "houlsby")]
        assert [run.label for run in mine[:4]] == [
            "lora · precision=fp32, quantize=none",
            "houlsby · precision=fp32, quantize=none",
            "lora · precision=fp32, quantize=nf4",
            "houlsby · precision=fp32, quantize=nf4",
        ]
    assert {run.adapter_name for run in plan} == {"lora", "houlsby"}
    plain = planned(tmp_path)
    fp32 = [run for run in plan if run.spec.scale == Scale()]
    assert [run.run_id for run in fp32] == [run.run_id for run in plain]
    assert [run.label for run in plain] == ["lora", "houlsby"] * 2


def test_one_axis_labels_only_that_axis_and_one_value_is_no_axis(tmp_path: Path) -> None:
    plan = planned(tmp_path, quantize=[None, "nf4"], precision="bf16", seeds=[0])
    assert [run.label for run in plan] == [
        "lora · quantize=none",
        "houlsby · quantize=none",
        "lora · quantize=nf4",
        "houlsby · quantize=nf4",
    ]
    assert {run.spec.scale.precision for run in plan} == {"bf16"}
    one = planned(tmp_path, quantize=["nf4"], precision=["bf16"], seeds=[0])
    scalar = planned(tmp_path, quantize="nf4", precision="bf16", seeds=[0])
    assert [(r.run_id, r.label) for r in one] == [(r.run_id, r.label) for r in scalar]
    assert [run.label for run in scalar] == ["lora", "houlsby"]


def test_sources_and_stacks_follow_the_scale_of_their_cell(tmp_path: Path) -> None:
    source = {"label": "lang-en", "data": {"twitter-sentiment": {"task": "mlm"}}}
    source |= {"method": "pfeiffer", "train_size": 100}
    mad_x = {"method": "pfeiffer", "stack": ["lang-en"], "label": "mad-x"}
    zero_shot = [{"data": "slovenian-opinions", "stack_swap": {"lang-en": "lang-en"}}]
    plan = planned(
        tmp_path,
        sources=[source],
        methods=["lora", mad_x],
        zero_shot=zero_shot,
        seeds=[0],
        precision=["fp32", "bf16"],
    )
    sources = {run.spec.scale.precision: run for run in plan if run.adapter_name == "lang-en"}
    assert [run.label for run in sources.values()] == [
        "lang-en · precision=fp32",
        "lang-en · precision=bf16",
    ]
    assert all(run.keep for run in sources.values())
    for run in plan:
        if run.adapter_name == "mad-x":
            own = sources[run.spec.scale.precision]
            assert run.needs == (own.run_id, own.run_id)
            assert run.spec.stack == (f"run:{own.run_id}/lang-en",)
            (target,) = run.spec.zero_shot
            assert target.stack_swap == (("lang-en", f"run:{own.run_id}/lang-en"),)
    placed = sources["bf16"].placed(tmp_path / "folders")
    assert placed.out == str(tmp_path / "folders" / sources["bf16"].run_id / "lang-en")


def test_a_sequence_study_crosses_the_scale_axes_too(tmp_path: Path) -> None:
    keys: dict[str, Any] = {"data": [], "sequence": ["reuters-r8", "rotten-tomatoes"]}
    keys |= {"methods": ["lora"], "strategies": ["sequential"], "train_sizes": [100]}
    plan = planned(tmp_path, **keys, seeds=[0], precision=["fp32", "bf16"])
    assert [item.label for item in plan] == [
        "lora · precision=fp32 · sequential",
        "lora · precision=bf16 · sequential",
    ]
    assert [item.spec.scale.precision for item in plan] == ["fp32", "bf16"]
    assert plan[0].run_id != plan[1].run_id
    assert plan[0].run_id == planned(tmp_path, **keys, seeds=[0])[0].run_id


@pytest.mark.parametrize(
    ("keys", "needles"),
    [
        ({"precision": "fp8"}, ("precision:", "auto, fp32, bf16 or fp16", "'fp8'")),
        ({"precision": ["fp32", "fp8"]}, ("precision:", "auto, fp32, bf16 or fp16", "'fp8'")),
        ({"precision": []}, ("precision:", "auto, fp32, bf16 or fp16", "got []")),
        ({"precision": [True]}, ("precision:", "auto, fp32, bf16 or fp16", "True")),
        ({"precision": [["bf16"]]}, ("precision:", "auto, fp32, bf16 or fp16", "['bf16']")),
        ({"precision": ["bf16", "bf16"]}, ("precision:", "'bf16' is listed twice")),
        ({"precision": ["auto", "fp32"]}, ("precision auto is fp32", "list each precision once")),
        ({"quantize": ["none", "q2"]}, ("quantize:", "none, nf4 or int8", "'q2'")),
        ({"quantize": "NF4"}, ("quantize:", "none, nf4 or int8", "'NF4'")),
        ({"quantize": 4}, ("quantize:", "none, nf4 or int8", "got 4")),
        ({"quantize": {"nf4": 1}}, ("quantize:", "none, nf4 or int8")),
        ({"quantize": [None, "none"]}, ("quantize:", "'none' is listed twice")),
        ({"base_dtype": "bf16", "precision": ["fp32", "bf16"]}, ("base-dtype bf16",)),
        ({"quantize": ["none", "nf4"], "methods": ["full"]}, ("full trains the base",)),
    ],
)
def test_a_bad_scale_axis_is_one_line_and_runs_nothing(
    keys: dict[str, Any],
    needles: tuple[str, ...],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = spec_file(tmp_path, **keys)
    with unchanged(tmp_path):
        refused(["study", "run", str(spec), "--no-progress"], capsys, *needles)


def test_planning_an_nf4_axis_does_not_import_bitsandbytes(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, quantize=["none", "nf4", "int8"])
    code = (
        "import sys; from pathlib import Path\n"
        "from adaptlab.study.spec import load_spec\n"
        "from adaptlab.study.planner import plan_study\n"
        f"plan = plan_study(load_spec({str(spec)!r}), Path({str(tmp_path)!r}))\n"
        "assert len(plan) == 12, len(plan)\n"
        "assert 'bitsandbytes' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_tiny_study_runs_both_precisions_and_tells_them_apart(
    tiny_model_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = str(write_reviews(tmp_path / "reviews.csv", rows=24))
    keys = {"methods": ["lora"], "seeds": [0], "precision": ["fp32", "bf16"], "device": "cpu"}
    spec = write_spec(tmp_path, tiny_model_dir, data, **keys)
    code, _, err = run_cli(["study", "run", str(spec), "--no-progress"], capsys)
    assert code == 0, err
    store = tmp_path / "tiny.db"
    records = load_records(store)
    assert {r.method_label: r.result.spec.scale.precision for r in records} == {
        "lora · precision=fp32": "fp32",
        "lora · precision=bf16": "bf16",
    }
    (status,) = study_status(store)
    assert {label: (m.planned, m.done) for label, m in status.methods.items()} == {
        "lora · precision=fp32": (1, 1),
        "lora · precision=bf16": (1, 1),
    }
    code, shown, err = run_cli(["study", "status", str(store)], capsys)
    assert code == 0, err
    assert "lora · precision=fp32" in shown and "lora · precision=bf16" in shown
    report = tmp_path / "tiny.html"
    code, _, err = run_cli(["study", "report", str(store), "--out", str(report)], capsys)
    assert code == 0, err
    html = report.read_text()
    assert "lora · precision=fp32" in html and "lora · precision=bf16" in html


def test_an_nf4_cell_without_bitsandbytes_fails_alone_with_its_one_line(
    tiny_model_dir: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # as if it were not installed
    data = str(write_reviews(tmp_path / "reviews.csv", rows=24))
    keys = {"methods": ["lora"], "seeds": [0], "quantize": ["none", "nf4"], "device": "cpu"}
    spec = write_spec(tmp_path, tiny_model_dir, data, **keys)
    code, _, err = run_cli(["study", "run", str(spec), "--no-progress"], capsys)
    assert code == 1
    (status,) = study_status(tmp_path / "tiny.db")
    assert (status.done, status.failed) == (1, 1)
    (error,) = status.errors
    assert error.startswith("lora · quantize=nf4: quantize needs bitsandbytes")
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(
            "error: 1 of 2 runs failed (first: lora · quantize=nf4: quantize needs bitsandbytes"
        )
    )

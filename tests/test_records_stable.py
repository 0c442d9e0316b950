"""Records keep their stored form: every kind of run and sequence spec (each method, a
combination, fusion, stack, masked LM, zero-shot targets, a non-default scale, every strategy on
each objective it runs on) writes the same dict and gets the same id as the stored copy in
`fixtures/spec_ids.json`, and reads back from that copy to the same id; a tiny-model run writes
the `metrics.json` stored in `fixtures/tiny-run-metrics.json` (times, hosts and versions aside).

`python tests/test_records_stable.py` writes both fixtures anew (only on purpose: a change in
them changes every user's run ids or records).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_methods import SINGLE_METHODS

from adaptlab.continual import SequenceSpec
from adaptlab.records.config import TrainConfig
from adaptlab.records.scale import Scale
from adaptlab.records.spec import RunSpec
from adaptlab.records.transfer import ZeroShotTarget
from adaptlab.study.planner import run_id
from adaptlab.study.sequence_plan import sequence_id

FIXTURES = Path(__file__).parent / "fixtures"
SPEC_IDS = FIXTURES / "spec_ids.json"
TINY_METRICS = FIXTURES / "tiny-run-metrics.json"

MODEL, DATA = "minilm-l6", "rotten-tomatoes"
TRAIN = TrainConfig(epochs=2, batch_size=8, seed=3)
METHODS = (
    *SINGLE_METHODS,
    "houlsby+lnfit",
    "lora+bitfit",
    {"lora": {"dora": True}},
    {"full": {"mixout": 0.9}},
    {"freeze": {"k": 1}},
    {"lora": {"rank": 4, "alpha": 16}},
)


def _run_specs() -> dict[str, RunSpec]:
    """Every kind of run spec, by a name that says what it holds."""
    specs = {
        f"method {json.dumps(method, sort_keys=True)}": RunSpec.build(
            MODEL, DATA, method, train=TRAIN, device="cpu"
        )
        for method in METHODS
    }
    specs["sized"] = RunSpec.build(MODEL, DATA, "lora", train_size=100, device="cpu")
    specs["fusion"] = RunSpec.build(
        MODEL, DATA, "fusion", train=TRAIN, device="cpu", fuse=("runs/a", "runs/b")
    )
    specs["stack"] = RunSpec.build(MODEL, DATA, "houlsby", device="cpu", stack=("runs/lang",))
    specs["masked lm"] = RunSpec.build(
        MODEL, "texts.txt", "pfeiffer", data_options={"task": "mlm"}, device="cpu"
    )
    specs["zero shot"] = RunSpec.build(
        MODEL,
        DATA,
        "houlsby",
        device="cpu",
        stack=("runs/en",),
        zero_shot=(ZeroShotTarget("sl.csv", {"label_column": "y"}, (("en", "runs/sl"),)),),
    )
    specs["data options"] = RunSpec.build(
        MODEL, "d.csv", "lora", device="cpu", data_options={"label_column": "y", "task": "token"}
    )
    specs["bf16 checkpointing"] = RunSpec.build(
        MODEL,
        DATA,
        "lora",
        device="cpu",
        scale=Scale(precision="bf16", gradient_checkpointing=True, offload_activations=True),
    )
    specs["nf4"] = RunSpec.build(
        MODEL, DATA, "lora", device="cpu", scale=Scale(precision="bf16", quantize="nf4")
    )
    return specs


def _sequence_specs() -> dict[str, SequenceSpec]:
    """Every strategy on each objective it runs on, and the sequence options."""
    from adaptlab.continual.registry import list_strategies

    specs = {}
    own = [e for e in list_strategies() if e.config_class.__module__.startswith("adaptlab.")]
    for entry in own:  # not those other tests register
        for objective in entry.objectives:
            specs[f"{entry.name} {objective}"] = SequenceSpec.build(
                MODEL,
                ("a.csv", "b.csv"),
                "lora",
                entry.name,
                train=TRAIN,
                device="cpu",
                objective=objective,
            )
    specs["options"] = SequenceSpec.build(
        MODEL,
        ("a.csv", "b.csv", "c.csv"),
        "houlsby+lnfit",
        "replay",
        {"rate": 0.05},
        train_size=50,
        test_size=20,
        single_stage=True,
        stage_options=({"label_column": "y"}, {}, {"text_column": "t"}),
        device="cpu",
        scale=Scale(precision="bf16"),
    )
    return specs


def _stored_ids() -> dict[str, Any]:
    return json.loads(SPEC_IDS.read_text(encoding="utf-8"))


def _every_spec() -> dict[str, tuple[Any, Callable[[Any], str]]]:
    found: dict[str, tuple[Any, Callable[[Any], str]]] = {}
    found.update({f"run {k}": (v, run_id) for k, v in _run_specs().items()})
    found.update({f"sequence {k}": (v, sequence_id) for k, v in _sequence_specs().items()})
    return found


def test_every_kind_of_spec_is_in_the_stored_copy() -> None:
    assert sorted(_every_spec()) == sorted(_stored_ids())


@pytest.mark.parametrize("name", sorted(_every_spec()))
def test_spec_writes_and_hashes_as_stored(name: str) -> None:
    spec, identify = _every_spec()[name]
    stored = _stored_ids()[name]
    assert spec.to_dict() == stored["spec"]
    assert identify(spec) == stored["id"]
    read_back = type(spec).from_dict(stored["spec"])
    assert identify(read_back) == stored["id"]


# --- a tiny run's metrics.json ---------------------------------------------------------------

VOLATILE = {
    "wall_seconds",
    "seconds",
    "host",
    "versions",
    "threads",
    "peak_memory_bytes",
    "adapter_bytes",
}
"""What differs between two identical runs: times, the machine and its CPU threads, the library
versions, and the folder's bytes (its manifest names the model folder, whose path is the test's
own)."""


def tiny_run_metrics(folder: Path) -> dict[str, Any]:
    """The metrics.json of a two-epoch full fine-tuning of a tiny BERT on a learnable CSV, with the
    model and data paths made relative to `folder` and the volatile fields dropped."""
    from cli_cases import write_reviews
    from tiny_models import save_tiny_bert

    from adaptlab.runs.run import METRICS_FILE, execute

    model = save_tiny_bert(str(folder / "model"))
    data = write_reviews(folder / "reviews.csv", rows=160)
    train = TrainConfig(epochs=2, batch_size=8, learning_rate=1e-2, seed=0)
    spec = RunSpec.build(model, str(data), "full", train=train, device="cpu")
    execute(spec, folder / "run", progress=False)
    written = (folder / "run" / METRICS_FILE).read_text(encoding="utf-8")
    return _stable(json.loads(written.replace(str(folder), "<folder>")))


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(item) for item in value]
    return value


def _close(found: Any, stored: Any, where: str = "") -> None:
    """Equal structure and values; floats within a relative 1e-3 (other CPUs' kernels round
    otherwise, and training carries the difference along)."""
    if isinstance(stored, dict):
        assert isinstance(found, dict) and sorted(found) == sorted(stored), where
        for key in stored:
            _close(found[key], stored[key], f"{where}.{key}")
    elif isinstance(stored, list):
        assert isinstance(found, list) and len(found) == len(stored), where
        for index, (a, b) in enumerate(zip(found, stored, strict=True)):
            _close(a, b, f"{where}[{index}]")
    elif isinstance(stored, float) and not isinstance(found, bool):
        assert isinstance(found, int | float), where
        assert math.isclose(found, stored, rel_tol=1e-3, abs_tol=1e-5), (where, found, stored)
    else:
        assert found == stored, (where, found, stored)


def test_tiny_run_writes_the_stored_metrics(tmp_path: Path) -> None:
    stored = json.loads(TINY_METRICS.read_text(encoding="utf-8"))
    _close(tiny_run_metrics(tmp_path), stored)


def _write_fixtures() -> None:
    """Write both stored copies from this checkout (on purpose only)."""
    import tempfile

    every = {
        name: {"spec": spec.to_dict(), "id": identify(spec)}
        for name, (spec, identify) in sorted(_every_spec().items())
    }
    SPEC_IDS.write_text(json.dumps(every, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    with tempfile.TemporaryDirectory() as folder:
        metrics = tiny_run_metrics(Path(folder))
    TINY_METRICS.write_text(json.dumps(metrics, indent=1, sort_keys=True) + "\n", "utf-8")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    _write_fixtures()

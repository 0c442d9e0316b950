"""Study specs: validation errors name the key and its line; the grid expands as written."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from study_helpers import assert_spec_error, write_spec_text

from adaptlab.errors import ConfigError
from adaptlab.study.planner import plan_study
from adaptlab.study.spec import load_spec

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
HEAD = "name: s\nmodels: [minilm-l6]\ndata: [rotten-tomatoes]\n"


def plan(tmp_path: Path, text: str) -> list:  # type: ignore[type-arg]
    path = write_spec_text(tmp_path, text)
    return plan_study(load_spec(path), tmp_path)


@pytest.mark.parametrize(
    ("body", "line", "parts"),
    [
        ("methods:\n  - full\n  - {houlsby: {hidden_size: 0}}\n", 6, ["methods[1]", "hidden_size"]),
        ("methods: [full]\nepochs: ten\n", 5, ["epochs", "valid integer", "'ten'"]),
        ("methods: [full]\nepoch: 3\n", 5, ["unknown key 'epoch'", "epochs"]),
        ("methods: [full]\nlearning_rates: fast\n", 5, ["learning_rates", "default"]),
        ("methods: [full]\nlearning_rates: [1e-4, 2]\n", 5, ["learning_rates", "item 1"]),
        ("methods:\n  - full\n  - adapterz\n", 6, ["methods[1]", "unknown method 'adapterz'"]),
        ("methods:\n  - method: houlsby\n    epoch: 3\n", 6, ["methods[0].epoch", "label"]),
        ("methods: [{houlsby: {}, epochs: 3}]\n", 4, ["methods[0]", "{method: ..."]),
        ("methods: [full, houlsby, {houlsby: {}}]\n", 4, ["both labelled 'houlsby'"]),
        ("methods: [full]\nseeds: [0, 1, 1]\n", 5, ["seeds", "listed twice"]),
        ("methods: [full]\ntrain_sizes: [1000, 0]\n", 5, ["train_sizes[1]", "greater than 0"]),
        ("methods: [full]\nresources: {cpus: 1, gpu: 1}\n", 5, ["resources.gpu", "gpus"]),
        ("methods: [full]\ndevice: gpu\n", 5, ["device", "cuda"]),
        ("methods: [full]\nseeds: [0]\nseeds: [1]\n", 6, ["'seeds' is given twice"]),
        ("methods: [full]\nmetric: f1\n", 5, ["metric must be one", "macro_f1", "'f1'"]),
        ("methods: [full]\nmetric: mse\n", 5, ["higher is better", "spearman"]),
        ("methods: [full\n", 5, ["not valid YAML"]),
    ],
)
def test_errors_name_the_key_and_its_line(
    tmp_path: Path, body: str, line: int, parts: list[str]
) -> None:
    assert_spec_error(write_spec_text(tmp_path, HEAD + body), line, parts)


def test_missing_key_and_bad_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="line 1: required key 'methods' is missing"):
        load_spec(write_spec_text(tmp_path, HEAD))
    with pytest.raises(ConfigError, match=r"line 1, name: name must be letters"):
        load_spec(
            write_spec_text(tmp_path, "name: my study\nmodels: [m]\ndata: [d]\nmethods: [full]\n")
        )
    with pytest.raises(ConfigError, match="not found"):
        load_spec(tmp_path / "nope.yaml")


def test_examples_load_and_expand(tmp_path: Path) -> None:
    sizes = {"quick": 6, "low-resource": 96, "lr-robustness": 30, "reuters-imbalance": 4}
    for name, size in sizes.items():
        spec = load_spec(EXAMPLES / f"{name}.yaml")
        assert spec.name == name
        assert len(plan_study(spec, EXAMPLES)) == size
    labels = [m.display_label for m in load_spec(EXAMPLES / "low-resource.yaml").methods]
    assert labels == [
        "full",
        "houlsby(hidden_size=64)",
        "houlsby(hidden_size=256)",
        "pfeiffer",
        "lora",
        "bitfit",
        "lnfit",
        "freeze(k=3)",
    ]


def test_default_learning_rates_are_each_methods_own(tmp_path: Path) -> None:
    runs = plan(tmp_path, HEAD + "methods: [full, houlsby, lora+bitfit, {freeze: {k: 1}}]\n")
    rates = {run.method_label: run.spec.learning_rate() for run in runs}
    assert rates == {"full": 2e-5, "houlsby": 1e-4, "lora+bitfit": 1e-4, "freeze(k=1)": 2e-5}
    assert all(run.spec.train.learning_rate is None for run in runs)


def test_a_list_of_learning_rates_crosses_every_method(tmp_path: Path) -> None:
    runs = plan(tmp_path, HEAD + "methods: [full, houlsby]\nlearning_rates: [2e-5, 1e-3, 0.01]\n")
    pairs = sorted((run.method_label, run.spec.learning_rate()) for run in runs)
    assert pairs == [(m, r) for m in ("full", "houlsby") for r in (2e-5, 1e-3, 0.01)]
    assert {type(run.spec.train.learning_rate) for run in runs} == {float}


def test_per_method_overrides_apply_to_that_method_only(tmp_path: Path) -> None:
    runs = plan(
        tmp_path,
        HEAD
        + textwrap.dedent(
            """\
        methods:
          - full
          - method: {houlsby: {hidden_size: 8}}
            epochs: 3
            batch_size: 4
            learning_rates: [1e-3, 3e-3]
            label: small-adapter
        epochs: 2
        """
        ),
    )
    by_label: dict[str, list] = {}  # type: ignore[type-arg]
    for run in runs:
        by_label.setdefault(run.method_label, []).append(run.spec)
    (full,) = by_label["full"]
    assert (full.train.epochs, full.train.batch_size, full.learning_rate()) == (2, 16, 2e-5)
    adapters = by_label["small-adapter"]
    assert [s.learning_rate() for s in adapters] == [1e-3, 3e-3]
    assert {(s.train.epochs, s.train.batch_size) for s in adapters} == {(3, 4)}
    assert adapters[0].methods[0].to_dict()["hidden_size"] == 8


def test_grid_size_and_run_ids_are_stable_and_distinct(tmp_path: Path) -> None:
    text = HEAD.replace("[rotten-tomatoes]", "[rotten-tomatoes, 20newsgroups]") + (
        "methods: [full, {houlsby: {hidden_size: 8}}, lora+bitfit]\n"
        "train_sizes: [100, 200, null]\nseeds: [0, 1]\nlearning_rates: [1e-4, 1e-3]\n"
    )
    first = plan(tmp_path, text)
    assert len(first) == 2 * 3 * 3 * 2 * 2
    ids = [run.run_id for run in first]
    assert len(set(ids)) == len(ids) and all(len(i) == 12 for i in ids)
    assert [run.run_id for run in plan(tmp_path, text)] == ids
    reordered = plan(tmp_path, text.replace("[0, 1]", "[1, 0]").replace("[100, 200", "[200, 100"))
    assert sorted(run.run_id for run in reordered) == sorted(ids)
    longer = plan(tmp_path, text + "epochs: 3\n")
    assert not set(run.run_id for run in longer) & set(ids)


def test_identical_runs_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="identical settings"):
        plan(tmp_path, HEAD + "methods: [houlsby, {houlsby: {hidden_size: 64}}]\n")


def test_relative_paths_are_read_beside_the_spec(tmp_path: Path) -> None:
    (tmp_path / "reviews.csv").write_text("text,label\na,b\n")
    runs = plan(
        tmp_path,
        "name: s\nmodels: [minilm-l6]\nmethods: [full]\n"
        "data: [{reviews.csv: {label_column: label}}, rotten-tomatoes]\n",
    )
    assert [run.spec.data for run in runs] == [str(tmp_path / "reviews.csv"), "rotten-tomatoes"]
    assert runs[0].spec.data_options == {"label_column": "label"}
    assert runs[0].spec.model == "minilm-l6"


def test_metric_is_not_part_of_a_runs_id(tmp_path: Path) -> None:
    default = plan(tmp_path, HEAD + "methods: [full, houlsby]\n")
    judged = plan(tmp_path, HEAD + "methods: [full, houlsby]\nmetric: accuracy\n")
    assert (
        load_spec(write_spec_text(tmp_path, HEAD + "methods: [full]\nmetric: mcc\n")).metric
        == "mcc"
    )
    assert [r.run_id for r in judged] == [r.run_id for r in default]  # judging, not training

"""Study entries that span the data sets (combine:, across_data: fusion, multi_task:): every
mistake is one line naming the file, the line and the entry, before anything runs; the run
records they plan refuse what they cannot be; the union of a multi-task run's data sets."""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path

import pytest
from cli_cases import refused, unchanged
from study_helpers import assert_spec_error, write_spec_text

from adaptlab.data.types import Dataset, Example
from adaptlab.data.union import label_columns, union_of
from adaptlab.errors import ConfigError, DataError
from adaptlab.records.combining import CombineRecipe, SourceFolder
from adaptlab.records.config import TrainConfig
from adaptlab.records.multi_task import TaskData
from adaptlab.records.spec import RunSpec
from adaptlab.runs.run import execute
from adaptlab.study.planned_run import run_id
from adaptlab.study.planner import plan_study
from adaptlab.study.spec import load_spec

HEAD = "name: s\nmodels: [minilm-l6]\ndata: [rotten-tomatoes, twitter-sentiment, reuters-r8]\n"
SINGLE = "  - {method: lora, label: single, learning_rates: [1e-3]}\n"


@pytest.mark.parametrize(
    ("body", "line", "parts"),
    [
        (
            "methods:\n" + SINGLE + "  - {combine: {how: ties}, adapters: [single]}\n",
            6,
            ["methods[1]", "how ties needs a density"],
        ),
        (
            "methods:\n" + SINGLE + "  - {combine: {how: nope}, adapters: [single]}\n",
            6,
            ["methods[1]", "how 'nope' is unknown", "dare_ties"],
        ),
        (
            "methods:\n"
            + SINGLE
            + "  - {combine: {how: linear, density: 0.5}, adapters: [single]}\n",
            6,
            ["density applies to ties"],
        ),
        (
            "methods:\n" + SINGLE + "  - {combine: {how: linear, bogus: 1}, adapters: [single]}\n",
            6,
            ["unknown key 'bogus'; known keys: how, weights, density, rank, majority_sign, seed"],
        ),
        (
            "methods:\n" + SINGLE + "  - {combine: {how: dare_ties, density: 0.5, seed: -1}, "
            "adapters: [single]}\n",
            6,
            ["seed", "greater than or equal to 0"],
        ),
        (
            "methods:\n" + SINGLE + "  - {combine: {how: linear, weights: [0, 0, 0]}, "
            "adapters: [single]}\n",
            6,
            ["weights are all zero"],
        ),
        ("methods:\n" + SINGLE + "  - {combine: {how: linear}}\n", 6, ["needs the method"]),
        (
            "methods:\n" + SINGLE + "  - {combine: {how: linear}, adapters: [single, single]}\n",
            6,
            ["name one method", "got 2"],
        ),
        (
            "methods:\n" + SINGLE + "  - {combine: {how: linear}, adapters: [single], "
            "learning_rates: [1e-3]}\n",
            6,
            ["combine: trains nothing; drop learning_rates:"],
        ),
        (
            "methods:\n"
            + SINGLE
            + "  - {combine: {how: linear}, method: lora, adapters: [single]}\n",
            6,
            ["method:", "combine:", "not both"],
        ),
        (
            "methods:\n" + SINGLE + "  - {method: null, label: lonely}\n",
            6,
            ["give method:", "or combine:"],
        ),
        (
            "methods:\n" + SINGLE + "  - {lora: {rank: 4}, multi_task: true}\n",
            6,
            ["to set multi_task for one method write {method: ..., multi_task: ...}"],
        ),
        (
            "methods:\n" + SINGLE + "  - {method: lora, across_data: true, label: x}\n",
            6,
            ["across_data:", "the method must be fusion"],
        ),
        (
            "methods:\n" + SINGLE + "  - {method: fusion, adapters: [single, single], "
            "across_data: true}\n",
            6,
            ["an across-data fusion fuses", "got 2"],
        ),
        (
            "methods:\n" + SINGLE + "  - {method: lora, multi_task: true, stack: [single], "
            "label: mt}\n",
            6,
            ["multi_task:", "drop stack:"],
        ),
        (
            "methods:\n" + SINGLE + "  - {method: fusion, adapters: [single], multi_task: true}\n",
            6,
            ["multi_task:", "cannot be a fusion"],
        ),
        (
            "methods:\n" + SINGLE + "  - {combine: {how: linear, weights: [1, 2]}, "
            "adapters: [single], label: two}\n",
            1,
            ["method two: combine: gives 2 weights for 3 data sets"],
        ),
        (
            "methods:\n" + SINGLE + "  - {combine: {how: linear}, adapters: [nowhere], label: c}\n",
            1,
            ["method c builds on 'nowhere', which is no method of the study"],
        ),
        (
            "methods:\n  - {method: lora, label: single, learning_rates: [1e-4, 1e-3]}\n"
            "  - {combine: {how: linear}, adapters: [single], label: c}\n",
            1,
            ["'single', which has 2 learning rates", "learning_rates: [0.0001]"],
        ),
        (
            "methods:\n" + SINGLE + "  - {combine: {how: linear}, adapters: [single], label: c}\n"
            "  - {combine: {how: linear}, adapters: [c], label: d}\n",
            1,
            ["method d builds on 'c'", "builds on other adapters itself"],
        ),
        (
            "sources: [{label: tweets, data: twitter-sentiment, method: lora}]\nmethods:\n"
            + SINGLE
            + "  - {combine: {how: linear}, adapters: [tweets], label: c}\n",
            1,
            ["method c builds on 'tweets', a source"],
        ),
        (
            "methods:\n" + SINGLE + "  - {combine: {how: linear}, adapters: [single], label: c}\n"
            "zero_shot: [slovenian-opinions]\n",
            1,
            ["zero_shot:", "takes none"],
        ),
        (
            "methods:\n" + SINGLE + "  - {method: lora, multi_task: true, label: mt}\n"
            "quantize: nf4\n",
            1,
            ["method mt scores adapters on a float32 base", "nf4"],
        ),
    ],
)
def test_spanning_entry_mistakes_are_one_line(
    tmp_path: Path, body: str, line: int, parts: list[str]
) -> None:
    assert_spec_error(write_spec_text(tmp_path, HEAD + body), line, parts)


@pytest.mark.parametrize(
    ("head", "entry", "what"),
    [
        ("data: [rotten-tomatoes]\n", "{combine: {how: linear}, adapters: [single]}", "combines"),
        (
            "data: [rotten-tomatoes]\n",
            "{method: fusion, adapters: [single], across_data: true}",
            "fuses",
        ),
        ("data: [rotten-tomatoes]\n", "{method: lora, multi_task: true, label: mt}", "trains one"),
    ],
)
def test_spanning_entries_need_two_data_sets(
    tmp_path: Path, head: str, entry: str, what: str
) -> None:
    path = write_spec_text(
        tmp_path, f"name: s\nmodels: [minilm-l6]\n{head}methods:\n{SINGLE}  - {entry}\n"
    )
    with pytest.raises(ConfigError, match=f"{what} .*every data set.*at least two") as error:
        load_spec(path)
    assert "\n" not in str(error.value)


def test_a_sequence_study_takes_no_combination(tmp_path: Path) -> None:
    text = (
        "name: s\nmodels: [minilm-l6]\nsequence: [reuters-r8, twitter-sentiment]\n"
        "strategies: [sequential]\nmethods:\n" + SINGLE + "  - {combine: {how: linear}, "
        "adapters: [single]}\n"
    )
    with pytest.raises(ConfigError, match="combine: and multi_task: are not for sequences"):
        load_spec(write_spec_text(tmp_path, text))


def test_data_sets_that_would_share_a_name_are_refused_when_planned(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "reviews.csv").write_text("text,label\nfine,x\n")
    text = textwrap.dedent(
        """\
        name: s
        models: [minilm-l6]
        data: [a/reviews.csv, b/reviews.csv]
        methods:
          - {method: lora, label: single}
          - {combine: {how: linear}, adapters: [single]}
        """
    )
    with pytest.raises(ConfigError, match="would both name their adapters 'reviews'") as error:
        plan_study(load_spec(write_spec_text(tmp_path, text)), tmp_path)
    assert "\n" not in str(error.value)


def test_study_run_refuses_a_bad_combination_in_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_spec_text(
        tmp_path,
        HEAD + "methods:\n" + SINGLE + "  - {combine: {how: ties}, adapters: [single]}\n",
    )
    with unchanged(tmp_path):
        refused(["study", "run", str(path)], capsys, "line 6", "needs a density")


TRAIN = TrainConfig(epochs=1, learning_rate=1e-3)
RECIPE = CombineRecipe(
    "linear", (SourceFolder("a", "/x/a", 0.5), SourceFolder("b", "/x/b", 0.5)), head="a"
)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"combine": RECIPE, "multi_task_adapter": "/x/mt"}, "not both"),
        ({"combine": RECIPE, "fuse": ("/x/a",)}, "takes no fuse"),
        ({"combine": RECIPE, "train": TrainConfig()}, "records the learning rate"),
        ({"multi_task_adapter": ""}, "must be a folder"),
        ({"combine": RECIPE, "device": "cpu", "scale_quantized": True}, "float32 base"),
    ],
)
def test_a_run_that_trains_nothing_refuses_what_it_cannot_be(
    settings: dict[str, object], message: str
) -> None:
    from adaptlab.records.scale import Scale

    if settings.pop("scale_quantized", False):
        settings["scale"] = Scale(quantize="nf4")
    settings.setdefault("train", TRAIN)
    with pytest.raises(ConfigError, match=message):
        RunSpec("minilm-l6", "rotten-tomatoes", (), **settings)  # type: ignore[arg-type]


def test_combination_records_refuse_a_head_they_do_not_keep_and_read_back() -> None:
    with pytest.raises(ConfigError, match="head of one of its sources"):
        CombineRecipe("linear", RECIPE.sources, head="c")
    spec = RunSpec("minilm-l6", "rotten-tomatoes", (), train=TRAIN, combine=RECIPE, test_size=9)
    assert RunSpec.from_dict(spec.to_dict()) == spec
    broken = spec.to_dict()
    broken["combine"]["sources"][0]["weight"] = "half"
    with pytest.raises(ConfigError, match=r"combine\.sources\[0\]\.weight: expected a number"):
        RunSpec.from_dict(broken)


def _hashed(written: dict[str, object]) -> str:
    text = json.dumps(written, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def test_a_linear_recipe_stored_before_linear_summed_updates_is_another_run() -> None:
    spec = RunSpec("minilm-l6", "rotten-tomatoes", (), train=TRAIN, combine=RECIPE, test_size=9)
    written = spec.to_dict()
    assert written["combine"]["arithmetic"] == "updates"
    stored_before = spec.to_dict()
    del stored_before["combine"]["arithmetic"]
    assert _hashed(spec.to_dict()) == run_id(spec)
    assert _hashed(stored_before) != run_id(spec)
    written["combine"]["arithmetic"] = "factors"
    with pytest.raises(ConfigError, match="arithmetic must be 'updates'"):
        RunSpec.from_dict(written)


def test_a_multi_task_run_trains_one_single_label_adapter() -> None:
    with pytest.raises(ConfigError, match="no fusion, stack or zero-shot"):
        RunSpec.build(
            "minilm-l6",
            "rotten-tomatoes",
            "lora",
            train=TRAIN,
            stack=("/x/a",),
            multi_task=(TaskData("reuters-r8"),),
        )
    with pytest.raises(ConfigError, match="task token is another"):
        RunSpec.build(
            "minilm-l6",
            "rotten-tomatoes",
            "lora",
            multi_task=(TaskData("tags.txt", {"task": "token"}),),
        )
    spec = RunSpec.build("minilm-l6", "rotten-tomatoes", "lora", multi_task=(TaskData("x.csv"),))
    assert RunSpec.from_dict(spec.to_dict()).to_dict() == spec.to_dict()


def test_test_size_caps_labelled_tasks_pairs_and_chats_only() -> None:
    with pytest.raises(ConfigError, match="test-size caps the test split of a labelled task"):
        RunSpec.build(
            "minilm-l6", "wiki.txt", "lora", data_options={"task": "causal-lm"}, test_size=5
        )
    with pytest.raises(ConfigError, match="test-size must be a positive integer"):
        RunSpec.build("minilm-l6", "rotten-tomatoes", "lora", test_size=0)


def test_execute_refuses_training_options_for_a_run_that_trains_nothing(tmp_path: Path) -> None:
    spec = RunSpec("minilm-l6", "rotten-tomatoes", (), train=TRAIN, combine=RECIPE)
    with pytest.raises(ConfigError, match="trains nothing takes no out"):
        execute(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def dataset(name: str, labels: tuple[str, ...], task: str = "single_label") -> Dataset:
    rows = tuple(Example(f"{name} {i}", i % len(labels)) for i in range(4))
    return Dataset(name, task, labels, {"train": rows, "dev": rows, "test": rows}, "made")


def test_the_union_prefixes_labels_and_finds_each_data_sets_columns() -> None:
    a, b = dataset("a", ("x", "y")), dataset("b", ("x", "z", "w"))
    union = union_of([a, b])
    assert union.label_names == ("a:x", "a:y", "b:x", "b:z", "b:w")
    assert [e.label for e in union.splits["train"]] == [0, 1, 0, 1, 2, 3, 4, 2]
    assert label_columns(union.label_names, b) == (2, 3, 4)
    with pytest.raises(DataError, match="not trained on c's label 'x'") as error:
        label_columns(union.label_names, dataset("c", ("x",)))
    assert "\n" not in str(error.value)
    with pytest.raises(DataError, match="two data sets of a multi-task run are named 'a'"):
        union_of([a, a])
    with pytest.raises(DataError, match="t is a token data set"):
        union_of([a, dataset("t", ("O",), task="token")])

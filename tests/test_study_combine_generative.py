"""The combining section of a study on generative data: single-task LoRA adapters of a tiny
decoder trained with `sft` on two data sets, their combinations without training, AdapterFusion
across the data sets and one multi-task adapter, each scored with the generative evaluation;
a combination's scores are those `adaptlab eval` gives the same combined adapter; what cannot
be compared is one line."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_cases import refused, run_cli, unchanged
from generative_helpers import write_chats, write_pairs
from study_helpers import save_spec, write_reviews

from adaptlab import combine_adapters
from adaptlab.errors import ConfigError, DataError
from adaptlab.records.config import TrainConfig
from adaptlab.records.multi_task import TaskData
from adaptlab.records.result import RunResult
from adaptlab.records.spec import RunSpec
from adaptlab.report import render_report
from adaptlab.runs.run import execute
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.kind_runs import adapter_folders
from adaptlab.study.planner import plan_study
from adaptlab.study.runner import run_study
from adaptlab.study.spec import load_spec
from adaptlab.study.store import load_records

QUIET = LocalExecutor(progress=False)
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "combine-smollm2.yaml"
SFT = {"task": "sft", "max_new_tokens": 3}
SINGLE = {"method": {"lora": {"rank": 4}}, "label": "single", "learning_rates": [5e-3]}
METHODS = [
    SINGLE,
    {"combine": {"how": "linear"}, "adapters": ["single"], "label": "linear"},
    {"combine": {"how": "ties", "density": 0.5}, "adapters": ["single"], "label": "ties"},
    {"method": "fusion", "adapters": ["single"], "across_data": True, "label": "fusion"},
    {"method": {"lora": {"rank": 4}}, "multi_task": True, "label": "multi-task"},
]
ORDER = ["single", "linear", "ties", "fusion", "multi-task"]
GENERATIVE = ("perplexity", "token_accuracy", "exact_match", "token_f1", "rougeL")
TRAIN_SIZE, MAX_LENGTH = 16, 32


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def write_doubles(path: Path, count: int = 40) -> Path:
    """`count` prompt -> completion rows of doubling, as JSONL."""
    rows = [{"prompt": f"double {i} ?", "completion": str(2 * i)} for i in range(count)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def write_study(folder: Path, model: str, data: list[object], **keys: object) -> Path:
    """A study of `data` on the tiny decoder, the five approaches, one seed and epoch."""
    spec = {
        "name": "gen",
        "models": [model],
        "data": data,
        "methods": METHODS,
        "train_sizes": [TRAIN_SIZE],
        "seeds": [0],
        "epochs": 1,
        "batch_size": 8,
        "max_length": MAX_LENGTH,
        "device": "cpu",
        **keys,
    }
    return save_spec(folder / "gen.yaml", spec)


@dataclass(frozen=True)
class Study:
    folder: Path
    store: Path
    rows: dict[tuple[str, str], RunResult]
    single_folders: dict[str, Path]


@pytest.fixture(scope="module")
def study(decoder: str, tmp_path_factory: pytest.TempPathFactory) -> Study:
    """Two sft data sets, every approach, run once."""
    folder = tmp_path_factory.mktemp("study")
    write_pairs(folder / "sums.jsonl", 40)
    write_doubles(folder / "doubles.jsonl", 40)
    data = [{"sums.jsonl": SFT}, {"doubles.jsonl": SFT}]
    summary = run_study(write_study(folder, decoder, data), executor=QUIET)
    assert not summary.failed, [o.error for o in summary.outcomes]
    assert len(summary.outcomes) == 11
    records = load_records(folder / "gen.db")
    rows = {(r.method_label, r.result.data.name): r.result for r in records}
    kept = adapter_folders(folder / "gen.db")
    singles = {
        r.result.data.name: kept / r.run_id / r.result.data.name
        for r in records
        if r.method_label == "single"
    }
    return Study(folder, folder / "gen.db", rows, singles)


def test_every_approach_is_scored_with_the_generative_evaluation(study: Study) -> None:
    union = study.rows[("multi-task", "sums + doubles")]
    assert union.spec.multi_task and union.data.sizes["train"] == 2 * TRAIN_SIZE
    for data in ("sums", "doubles"):
        for method in ORDER:
            result = study.rows[(method, data)]
            assert result.data.task == "sft" and result.metric == "exact_match", (method, data)
            for metric in GENERATIVE:
                for scores in (result.test, result.dev):
                    assert math.isfinite(scores[metric]), (method, data, metric)
            assert result.generations and all(g.reference for g in result.generations)
            assert result.data.sizes["train"] == TRAIN_SIZE
            assert result.data.sizes["test"] == study.rows[("single", data)].data.sizes["test"]
        for method in ("linear", "ties", "multi-task"):
            untrained = study.rows[(method, data)]
            assert untrained.epochs == () and untrained.best_epoch == 0
        combined = study.rows[("ties", data)]
        assert combined.spec.combine is not None and combined.spec.combine.head is None
        assert combined.trainable_parameters == 0
        assert study.rows[("multi-task", data)].parameter_groups == union.parameter_groups
        assert study.rows[("fusion", data)].spec.fuse


def test_a_combination_scores_as_adaptlab_eval_scores_the_combined_adapter(
    study: Study, decoder: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sources = [study.single_folders[name] for name in ("sums", "doubles")]
    combined = combine_adapters(
        sources,
        tmp_path / "ties",
        how="ties",
        density=0.5,
        names=["sums", "doubles"],
        model=decoder,
    )
    for data in ("sums", "doubles"):
        result = study.rows[("ties", data)]
        code, out, err = run_cli(
            [
                "eval",
                "--adapter",
                str(combined),
                "--model",
                decoder,
                "--data",
                str(study.folder / f"{data}.jsonl"),
                "--max-new-tokens",
                "3",
                "--max-length",
                str(MAX_LENGTH),
                "--batch-size",
                str(result.spec.train.eval_batch_size),
                "--device",
                "cpu",
                "--json",
            ],
            capsys,
        )
        assert code == 0, err
        scored = json.loads(out)
        assert scored["examples"] == result.data.sizes["test"]
        assert scored["loss"] == pytest.approx(result.test_loss, abs=1e-4)
        for metric in GENERATIVE:
            assert scored[metric] == pytest.approx(result.test[metric], abs=1e-4), metric


def test_the_report_compares_the_approaches_by_the_generative_metric(study: Study) -> None:
    html = render_report(load_records(study.store), title="gen")
    section = html[html.index('id="combining"') :]
    section = section[: section.index("</section>")]
    for header in ("<th>setting</th>", "<th>metric</th>", *(f"<th>{m}</th>" for m in ORDER)):
        assert header in section, header
    assert section.count("<td>exact_match</td>") == 2  # one row per data set
    rows = section.split("</tr>")[1:-1]  # one per data set
    assert len(rows) == 2 and all("★\u00a0" in row for row in rows)  # the best (each of a tie)
    assert "Mean gap to the single-task adapters (single) over the data sets: linear " in section


def test_chat_adapters_combine_and_train_together_scored_on_their_last_turns(
    decoder: str, tmp_path: Path
) -> None:
    write_chats(tmp_path / "greetings.jsonl", 30)
    rows = [
        {
            "messages": [
                {"role": "user", "content": f"triple {i} ?"},
                {"role": "assistant", "content": str(3 * i)},
            ]
        }
        for i in range(30)
    ]
    (tmp_path / "triples.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    chat = {"task": "chat", "max_new_tokens": 3}
    data = [{"greetings.jsonl": chat}, {"triples.jsonl": chat}]
    methods = [METHODS[0], METHODS[1], METHODS[4]]
    path = write_study(tmp_path, decoder, data, methods=methods, train_sizes=[8])
    summary = run_study(path, executor=QUIET)
    assert not summary.failed, [o.error for o in summary.outcomes]
    for record in load_records(tmp_path / "gen.db"):
        result = record.result
        assert result.data.task == "chat" and result.metric == "rougeL"
        assert math.isfinite(result.test["rougeL"]) and math.isfinite(result.test["perplexity"])
        assert result.generations


def test_test_size_caps_the_test_split_of_pairs(decoder: str, tmp_path: Path) -> None:
    write_pairs(tmp_path / "sums.jsonl", 60)
    write_doubles(tmp_path / "doubles.jsonl", 60)
    data = [{"sums.jsonl": SFT}, {"doubles.jsonl": SFT}]
    path = write_study(tmp_path, decoder, data, test_size=2, methods=METHODS[:2])
    runs = plan_study(load_spec(path), tmp_path)
    assert {run.spec.test_size for run in runs} == {2}
    assert not run_study(path, executor=QUIET).failed
    records = load_records(tmp_path / "gen.db")
    assert len(records) == 4
    for record in records:
        assert record.result.data.sizes["test"] == 2  # of 6


def test_a_study_mixing_classification_and_generative_data_is_refused(
    decoder: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_pairs(tmp_path / "sums.jsonl", 40)
    write_reviews(tmp_path / "reviews.csv", rows=40)
    path = write_study(tmp_path, decoder, ["reviews.csv", {"sums.jsonl": SFT}])
    with unchanged(tmp_path):
        refused(
            ["study", "run", str(path)],
            capsys,
            "method linear spans every data set",
            "reviews.csv is classification, sums.jsonl is sft data",
        )


def test_a_study_mixing_sft_and_chat_data_is_refused(
    decoder: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_pairs(tmp_path / "sums.jsonl", 40)
    write_chats(tmp_path / "chats.jsonl", 30)
    data = [{"sums.jsonl": SFT}, {"chats.jsonl": {"task": "chat", "max_new_tokens": 3}}]
    path = write_study(tmp_path, decoder, data)
    with unchanged(tmp_path):
        refused(
            ["study", "run", str(path)], capsys, "sums.jsonl is sft data, chats.jsonl is chat data"
        )


def test_a_multi_task_union_gives_its_whole_union_options_alike(
    decoder: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_pairs(tmp_path / "sums.jsonl", 40)
    write_doubles(tmp_path / "doubles.jsonl", 40)
    data = [{"sums.jsonl": SFT}, {"doubles.jsonl": {**SFT, "max_new_tokens": 5}}]
    path = write_study(tmp_path, decoder, data)
    with unchanged(tmp_path):
        refused(
            ["study", "run", str(path)],
            capsys,
            "give max_new_tokens alike",
            "sums.jsonl has 3",
            "doubles.jsonl has 5",
        )


TRAIN = TrainConfig(epochs=1, learning_rate=1e-3)


@pytest.mark.parametrize(
    ("first", "other", "needles"),
    [
        (
            {"task": "sft"},
            {},
            ["cannot mix classification and generative data", "a is sft data and b is classif"],
        ),
        ({}, {"task": "chat"}, ["a is classification and b is chat data"]),
        ({"task": "sft"}, {"task": "chat"}, ["one generative task", "a is sft", "b is chat"]),
        ({"task": "sft", "pack": True}, {"task": "sft"}, ["give pack alike"]),
        ({"task": "causal-lm"}, {"task": "causal-lm", "metric": "token_accuracy"}, ["metric"]),
        ({"task": "mlm"}, {"task": "mlm"}, ["task mlm is another (a)"]),
    ],
)
def test_a_multi_task_run_refuses_data_that_cannot_be_united(
    first: dict[str, object], other: dict[str, object], needles: list[str]
) -> None:
    with pytest.raises(ConfigError) as error:
        RunSpec.build(
            "smollm2-135m", "a", "lora", data_options=first, multi_task=(TaskData("b", other),)
        )
    message = str(error.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, (needle, message)


def test_sft_data_may_cap_its_test_split_and_documents_may_not() -> None:
    spec = RunSpec.build("smollm2-135m", "a", "lora", data_options={"task": "sft"}, test_size=5)
    assert RunSpec.from_dict(spec.to_dict()).to_dict() == spec.to_dict()
    assert spec.to_dict()["test_size"] == 5
    with pytest.raises(ConfigError, match="task causal-lm has none"):
        RunSpec.build("smollm2-135m", "a", "lora", data_options={"task": "causal-lm"}, test_size=5)


def test_an_adapter_scored_on_data_of_another_task_is_refused(
    study: Study, decoder: str, tmp_path: Path
) -> None:
    write_chats(tmp_path / "chats.jsonl", 30)
    spec = RunSpec(
        decoder,
        str(tmp_path / "chats.jsonl"),
        (),
        train=TRAIN,
        data_options={"task": "chat", "max_new_tokens": 3},
        device="cpu",
        multi_task_adapter=str(study.single_folders["sums"]),
    )
    with pytest.raises(DataError) as error:
        execute(spec)
    assert str(error.value).endswith("is read as chat data, the adapter was trained for sft")


def test_the_smollm2_example_plans_every_approach_on_capped_test_splits() -> None:
    runs = plan_study(load_spec(EXAMPLE), EXAMPLE.parent)
    assert len(runs) == 57
    assert {run.spec.test_size for run in runs} == {100}
    recipes = [run.spec.combine for run in runs if run.spec.combine is not None]
    assert len(recipes) == 27 and {recipe.head for recipe in recipes} == {None}

"""sft and chat sequences: stages of prompt -> completion pairs or chats read and masked as
`adaptlab train --task sft|chat` reads them, the matrix of answer perplexities with the greedy
exact match beside it, every strategy that declares them, resume after a stage, the kept
adapter (a chat's with its template) and each refusal one line with nothing written."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
from cli_cases import refused, run_cli, unchanged, write_reviews
from generative_helpers import tiny_decoder, write_chats, write_pairs
from serve_helpers import CHAT_TEMPLATE
from study_helpers import one_thread
from test_continual_resume import stopped_and_resumed

from adaptlab.continual import SequenceSpec, run_sequence
from adaptlab.continual.answer_stages import AnswerStages
from adaptlab.continual.corpus_run import collate, predicted
from adaptlab.continual.distillation import LogitDistillationConfig, TextLogitDistillation
from adaptlab.continual.objectives import get_objective
from adaptlab.continual.registry import strategies_for
from adaptlab.continual.result import SequenceResult
from adaptlab.continual.stages import KeptAdapter, use_stage_adapter
from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.engine.lm_head_capture import lm_head_input
from adaptlab.errors import AdaptlabError, ConfigError
from adaptlab.methods.manifest import parse_manifest
from adaptlab.records.config import TrainConfig
from adaptlab.records.spec import RunSpec
from adaptlab.runs.preparers import prepare_run
from adaptlab.serve.registry import is_causal_lm
from adaptlab.tasks.registry import get_task

TRAIN = TrainConfig(epochs=1, batch_size=8, learning_rate=1e-2, max_length=32, seed=0)
NEW_TOKENS = {"max_new_tokens": 3}
SEQUENCE = [
    "sequence", "--method", "lora", "--epochs", "1", "--batch-size", "8", "--learning-rate",
    "1e-2", "--max-length", "32", "--max-new-tokens", "3", "--train-size", "12",
    "--test-size", "4", "--device", "cpu", "--no-progress",
]  # fmt: skip


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny decoder with a chat template, two pair files and two chat files."""
    folder = tmp_path_factory.mktemp("answers")
    tiny_decoder(folder)
    write_pairs(folder / "sums.jsonl", 80)
    rows = [{"prompt": f"twice {i} ?", "completion": str(2 * i)} for i in range(80)]
    (folder / "doubles.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    write_chats(folder / "chats.jsonl", 80)
    write_chats(folder / "more-chats.jsonl", 60)
    return folder


def model_of(inputs: Path) -> str:
    return str(inputs / "tiny-decoder")


def stages_of(inputs: Path, objective: str) -> tuple[str, str]:
    first, second = ("sums", "doubles") if objective == "sft" else ("chats", "more-chats")
    return str(inputs / f"{first}.jsonl"), str(inputs / f"{second}.jsonl")


def answer_sequence(
    inputs: Path, objective: str, strategy: str = "sequential", **options: object
) -> SequenceSpec:
    stages = stages_of(inputs, objective)
    return SequenceSpec.build(
        model_of(inputs),
        stages,
        "lora",
        strategy,
        options,
        train=TRAIN,
        train_size=12,
        test_size=4,
        objective=objective,
        stage_options=(NEW_TOKENS,) * len(stages),
    )


@pytest.mark.parametrize("objective", ["sft", "chat"])
def test_a_stage_masks_the_loss_as_adaptlab_train_does(inputs: Path, objective: str) -> None:
    data = stages_of(inputs, objective)[0]
    spec = answer_sequence(inputs, objective)
    run_spec = RunSpec.build(
        model_of(inputs),
        data,
        "lora",
        train_size=12,
        train=TRAIN,
        data_options={"task": objective, **NEW_TOKENS},
        device="cpu",
    )
    with one_thread():
        trained = prepare_run(get_task(objective), run_spec, torch.device("cpu"))
        stage = get_objective(objective).read_stage(data, NEW_TOKENS, spec)
    encoded = stage.encoded.splits["train"].encoded
    assert list(encoded) == list(trained.train_examples)  # the same rows, ids and labels
    answers = sum(1 for e in encoded for label in e.labels if label != IGNORE_INDEX)
    assert 0 < answers < sum(len(e.input_ids) for e in encoded)  # the prompts do not train
    stages = AnswerStages(trained.model, trained.tokenizer, [stage], KeptAdapter(objective), 8)
    run = stages.run(0)
    indices = list(range(6))
    batch = trained.batch(indices, torch.Generator())
    mine = collate([run.stage.train[i] for i in indices], trained.pad_id)
    assert torch.equal(mine["labels"], batch["labels"])
    theirs = trained.loss(batch).item()
    ours = run.forward([(0, i) for i in indices], hidden_states=False)[0].item()
    assert ours == pytest.approx(theirs, rel=1e-5)
    assert run.loss_terms([(0, i) for i in indices]) == trained.loss_terms(batch)


@pytest.mark.parametrize("objective", ["sft", "chat"])
def test_a_two_stage_sequence_runs_from_the_command_line(
    inputs: Path, objective: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "seq"
    stages = ",".join(stages_of(inputs, objective))
    args = [*SEQUENCE, "--objective", objective, "--model", model_of(inputs), "--stages", stages]
    with one_thread():
        code, printed, err = run_cli(
            [*args, "--strategy", "replay", "-s", "rate=0.5", "--out", str(out)], capsys
        )
    assert code == 0, err
    assert "perplexity after each stage" in printed and "adapter in" in printed
    result = json.loads((out / "sequence.json").read_text())
    assert result["metric"] == "perplexity" and result["spec"]["objective"] == objective
    matrix = result["matrix"]
    assert len(matrix) == 2 and all(len(row) == 2 for row in matrix)
    assert all(math.isfinite(v) and v > 1 for row in matrix for v in row)
    for row in result["tests"]:
        for cell in row:
            assert cell["perplexity"] == pytest.approx(math.exp(cell["loss"]))
            assert 0 <= cell["exact_match"] <= 1
    stage = result["stages"][0]
    assert stage["sizes"] == {"train": 12, "dev": 8, "test": 4}  # 80 rows: 64 / 8 / 8
    assert stage["dropped"] == {"train": 0, "dev": 0, "test": 0}
    assert result["spec"]["stage_options"] == [NEW_TOKENS, NEW_TOKENS]
    manifest = parse_manifest(out / "adapter")
    assert is_causal_lm(manifest) and manifest.task == objective
    assert manifest.chat_template == (CHAT_TEMPLATE if objective == "chat" else None)
    again = SequenceResult.from_dict(result)
    assert [list(row) for row in again.matrix] == matrix
    assert again.stages[0].dropped == stage["dropped"]


@pytest.mark.parametrize("objective", ["sft", "chat"])
def test_every_strategy_that_declares_the_objective_runs(inputs: Path, objective: str) -> None:
    strategies = strategies_for(objective)
    assert strategies == ["sequential", "kd-logit", "adapter-per-stage", "replay"]
    for strategy in strategies:
        options = {"rate": 0.5} if strategy == "replay" else {}
        spec = answer_sequence(inputs, objective, strategy, **options)
        with one_thread():
            result = run_sequence(spec, progress=False)
        assert len(result.matrix) == 2, strategy
        assert all(math.isfinite(v) and v > 1 for row in result.matrix for v in row), strategy
        if strategy == "adapter-per-stage":  # stage 0's adapter never trains again
            assert result.matrix[1][0] == result.matrix[0][0]
        else:
            assert result.matrix[1][0] != result.matrix[0][0], strategy


def test_ewc_and_the_representation_strategies_are_refused_in_one_line() -> None:
    for strategy in ("ewc", "kd-representation", "kd-contrastive"):
        with pytest.raises(ConfigError, match=f"strategy {strategy} is for classification"):
            SequenceSpec.build("m", ["a"], "lora", strategy, objective="sft")


def test_the_teacher_is_taken_at_the_answers_positions_only(inputs: Path) -> None:
    spec = answer_sequence(inputs, "sft", "kd-logit")
    with one_thread():
        data = [get_objective("sft").read_stage(s, NEW_TOKENS, spec) for s in spec.stages]
        stages = AnswerStages.load("sft", spec, data, torch.device("cpu"))
        use_stage_adapter(stages.model, "sequence", spec.methods, 0)
        run = stages.run(1)
        strategy = TextLogitDistillation(LogitDistillationConfig())
        strategy.begin(run)
    for document, cached in zip(run.stage.train, strategy.teacher, strict=True):
        targets = sum(1 for label in document.labels[1:] if label != IGNORE_INDEX)
        assert cached.ids.shape[0] == targets == len(predicted(document))
        assert targets < len(document.input_ids) - 1
    rows = [(1, 0), (1, 1), (0, 3)]
    batch = collate([stages.stages[s].train[i] for s, i in rows], stages.tokenizer.pad_token_id)
    inputs_ = {k: batch[k] for k in ("input_ids", "attention_mask")}
    penalty = strategy.penalty(run, rows, lm_head_input(stages.model, **inputs_))
    assert penalty is not None and penalty.item() == pytest.approx(0.0, abs=1e-4)


def test_an_sft_sequence_resumes_after_a_stage(inputs: Path, tmp_path: Path) -> None:
    spec = answer_sequence(inputs, "sft", "kd-logit")
    run = stopped_and_resumed(spec, tmp_path)
    whole, resumed = run.whole, run.resumed
    assert run.trained == [1]
    for row, expected in zip(resumed.tests, whole.tests, strict=True):
        assert [c["loss"] for c in row] == pytest.approx([c["loss"] for c in expected], abs=1e-5)
    assert resumed.stages[0].dropped == whole.stages[0].dropped


@pytest.mark.parametrize(
    ("objective", "stage", "needles"),
    [
        ("sft", "rotten-tomatoes", ("stage rotten-tomatoes is a single_label task",
                                    "sft sequences take prompt -> completion pairs")),
        ("sft", "reviews.csv", ("reviews.csv: column 'prompt' not found",)),
        ("sft", "friends-chat", ("stage friends-chat: built-in friends-chat holds chats",)),
        ("chat", "sums.jsonl", ("sums.jsonl: column 'messages' not found",)),
        ("chat", "silent.jsonl", ("stage ", "silent.jsonl line 1 has no assistant message")),
    ],
)  # fmt: skip
def test_a_stage_that_is_not_the_objectives_data_is_one_line(
    inputs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    objective: str,
    stage: str,
    needles: tuple[str, ...],
) -> None:
    write_reviews(tmp_path / "reviews.csv")
    chat = {"messages": [{"role": "user", "content": "anyone there?"}]}
    (tmp_path / "silent.jsonl").write_text(json.dumps(chat) + "\n")
    (tmp_path / "sums.jsonl").write_bytes((inputs / "sums.jsonl").read_bytes())
    given = stage if stage in ("rotten-tomatoes", "friends-chat") else str(tmp_path / stage)
    good = stages_of(inputs, objective)[0]
    out = tmp_path / "seq"
    args = [*SEQUENCE, "--objective", objective, "--model", model_of(inputs),
            "--stages", f"{good},{given}", "--out", str(out)]  # fmt: skip
    with unchanged(tmp_path), unchanged(inputs):
        refused(args, capsys, *needles)
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "needles"),
    [
        (["--objective", "sft", "--strategy", "ewc"], ("strategy ewc is for classification",)),
        (["--objective", "causal-lm", "--max-new-tokens", "4"],
         ("--max-new-tokens is for sft and chat sequences; this one is a causal-lm sequence",)),
        (["--objective", "chat", "--chat-template", "none.jinja"],
         ("chat template", "none.jinja is not a file")),
        (["--objective", "sft", "--max-length", "3"], ("has no example that fits",)),
        (["--objective", "sft", "--max-new-tokens", "0"], ("max_new_tokens must be",)),
    ],
)  # fmt: skip
def test_bad_sequence_options_are_one_line(
    inputs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    extra: list[str],
    needles: tuple[str, ...],
) -> None:
    monkeypatch.chdir(tmp_path)
    objective = extra[extra.index("--objective") + 1]
    stages = ",".join(stages_of(inputs, "chat" if objective == "chat" else "sft"))
    out = tmp_path / "seq"
    args = [*SEQUENCE, "--model", model_of(inputs), "--stages", stages, "--out", str(out), *extra]
    with unchanged(tmp_path), unchanged(inputs):
        refused(args, capsys, *needles)
    assert not out.exists()


def test_an_encoder_is_refused_before_any_stage_is_read(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tiny_models import save_tiny_bert

    bert = save_tiny_bert(str(tmp_path / "bert"))
    capsys.readouterr()  # what saving printed
    out = tmp_path / "seq"
    stages = ",".join(stages_of(inputs, "chat"))
    with unchanged(tmp_path), unchanged(inputs):
        refused(
            [*SEQUENCE, "--objective", "chat", "--model", bert, "--stages", stages,
             "--out", str(out)],
            capsys,
            "is a BertModel (bert), an encoder",
            "objective chat",
            "needs a decoder-only causal LM",
        )  # fmt: skip


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"pack": True}, "takes no pack (a sequence trains its stages in padded batches)"),
        ({"metric": "exact_match"}, "takes no metric"),
        ({"text_column": "body"}, "takes no text_column"),
        ({"prompt_column": "question"}, "column 'question' not found"),
    ],
)
def test_stage_options_a_sequence_cannot_read_are_one_line(
    inputs: Path, options: dict[str, object], needle: str
) -> None:
    stages = stages_of(inputs, "sft")
    spec = SequenceSpec.build(
        model_of(inputs), stages, "lora", train=TRAIN, objective="sft",
        stage_options=(NEW_TOKENS, {**NEW_TOKENS, **options}),
    )  # fmt: skip
    with pytest.raises(AdaptlabError, match=re.escape(needle)) as raised:
        run_sequence(spec, progress=False)
    assert str(raised.value).startswith(f"stage {stages[1]}: ")


def test_chat_stages_rendered_with_different_templates_are_refused(
    inputs: Path, tmp_path: Path
) -> None:
    template = tmp_path / "other.jinja"
    template.write_text(
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    stages = stages_of(inputs, "chat")
    spec = SequenceSpec.build(
        model_of(inputs), stages, "lora", train=TRAIN, objective="chat",
        stage_options=(NEW_TOKENS, {**NEW_TOKENS, "chat_template": str(template)}),
    )  # fmt: skip
    with pytest.raises(ConfigError, match="render chats with different chat templates"):
        run_sequence(spec, progress=False)


def test_stage_options_keep_their_values_and_refuse_objects(inputs: Path) -> None:
    spec = answer_sequence(inputs, "chat")
    options = {"max_new_tokens": 3, "train_on_prompt": True, "stop": ["\n"]}
    spec = SequenceSpec.from_dict({**spec.to_dict(), "stage_options": [options, options]})
    assert spec.options_of(1) == options
    with pytest.raises(ConfigError, match=r"stage_options\[0\]\.stop: expected a text"):
        SequenceSpec.from_dict({**spec.to_dict(), "stage_options": [{"stop": {"a": 1}}, {}]})


def test_a_study_plans_sft_sequences(inputs: Path, tmp_path: Path) -> None:
    from adaptlab.study.sequence_plan import plan_sequences
    from adaptlab.study.spec import StudySpec

    data = {
        "name": "answers",
        "objective": "sft",
        "models": [model_of(inputs)],
        "sequence": [stages_of(inputs, "sft")[0], {"countries-qa": {"task": "sft"}}],
        "methods": ["lora"],
        "strategies": ["sequential", "kd-logit"],
    }
    planned = plan_sequences(StudySpec.model_validate(data), tmp_path)
    assert [p.spec.objective for p in planned] == ["sft"] * 2
    assert planned[0].spec.stage_options == ({}, {"task": "sft"})
    with pytest.raises(ValueError, match="stage rotten-tomatoes is a single_label task"):
        StudySpec.model_validate({**data, "sequence": ["rotten-tomatoes", *data["sequence"][:1]]})


def test_a_study_passes_its_stages_generative_options_on(inputs: Path, tmp_path: Path) -> None:
    from adaptlab.study.sequence_plan import plan_sequences
    from adaptlab.study.spec import StudySpec

    first = stages_of(inputs, "sft")[0]
    data = {
        "name": "answers",
        "objective": "sft",
        "models": [model_of(inputs)],
        "sequence": [
            {first: {"task": "sft", "max_new_tokens": 4, "stop": "\n"}},
            {"countries-qa": {"task": "sft", "max_new_tokens": 32}},  # 32: the default
        ],
        "methods": ["lora"],
        "strategies": ["sequential"],
    }
    (planned,) = plan_sequences(StudySpec.model_validate(data), tmp_path)
    first_options = {"task": "sft", "max_new_tokens": 4, "stop": ["\n"]}
    assert planned.spec.stage_options == (first_options, {"task": "sft"})
    refusals = {
        "pack": (
            {first: {"task": "sft", "pack": True}},
            "takes no pack (a sequence trains its stages in padded",
        ),
        "range": ({first: {"task": "sft", "max_new_tokens": 0}}, "max_new_tokens"),
        "shape": (
            {"friends-chat": {"task": "sft", "max_new_tokens": 4}},
            "friends-chat holds chats",
        ),
    }
    for stage, needle in refusals.values():
        with pytest.raises(ValueError, match=re.escape(needle)):
            StudySpec.model_validate({**data, "sequence": [stage, data["sequence"][1]]})
    lifelong = {**data, "objective": "causal-lm", "strategies": ["sequential"]}
    stage = {"docs.txt": {"task": "causal-lm", "max_new_tokens": 4}}
    with pytest.raises(
        ValueError,
        match="max-new-tokens is for sft, chat, seq2seq, .*; this one is a causal-lm run",
    ):
        StudySpec.model_validate({**lifelong, "sequence": [stage, "more.txt"]})

"""Causal-LM sequences (lifelong pretraining): perplexity matrices and their scores, the
strategies on a causal LM, the teacher's cache, resume after a stage, and the study and report
plumbing."""

from __future__ import annotations

import base64
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from study_helpers import one_thread
from test_continual_resume import stopped_and_resumed
from tiny_models import save_tiny_llama, tiny_model

from adaptlab.continual import SequenceSpec, run_sequence, summarize
from adaptlab.continual.corpus_run import TextStage, TextStageRun, collate, perplexity
from adaptlab.continual.distillation import (
    TEACHER_TOP_K,
    LogitDistillationConfig,
    TeacherTokens,
    TextLogitDistillation,
    merged_kl,
    teacher_tokens,
)
from adaptlab.continual.replay import Replay, ReplayConfig
from adaptlab.continual.result import SequenceResult
from adaptlab.engine.lm_head_capture import lm_head_input
from adaptlab.errors import ConfigError
from adaptlab.methods import add_adapter, train_adapter
from adaptlab.methods.compose import resolve
from adaptlab.records.config import TrainConfig
from adaptlab.report.plots import score_matrix

WORDS = {
    "finance": [
        "shares",
        "profit",
        "market",
        "stock",
        "bank",
        "trade",
        "price",
        "quarter",
        "dividend",
    ],
    "sport": ["match", "goal", "team", "player", "coach", "season", "league", "score", "final"],
}


def write_corpus(folder: Path, name: str, documents: int = 40) -> str:
    """A .txt corpus, one document a line, from its own small vocabulary."""
    generator = torch.Generator().manual_seed(len(name))
    words = WORDS[name]
    lines = []
    for _ in range(documents):
        picks = torch.randint(len(words), (8,), generator=generator).tolist()
        lines.append("the " + " ".join(words[i] for i in picks))
    path = folder / f"{name}.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, tuple[str, str]]:
    folder = tmp_path_factory.mktemp("lifelong")
    model = save_tiny_llama(str(folder / "tiny-llama"))
    return model, (write_corpus(folder, "finance"), write_corpus(folder, "sport"))


def lm_sequence(
    model: str, stages: tuple[str, ...], strategy: str, **options: object
) -> SequenceSpec:
    train = TrainConfig(epochs=2, batch_size=8, learning_rate=1e-2, max_length=16, seed=0)
    return SequenceSpec.build(
        model, stages, "lora", strategy, options, train=train, objective="causal-lm"
    )


def test_perplexity_scores_read_like_accuracy_scores() -> None:
    # Lower is better: perplexity rising from 10 to 12 on stage 0 is forgetting of 2.
    matrix = [[10.0, 30.0, 40.0], [12.0, 20.0, 35.0], [13.0, 22.0, 15.0]]
    scores = summarize(matrix, [10.0, 18.0, 16.0], "perplexity")
    assert scores.average == pytest.approx((13 + 22 + 15) / 3)
    assert scores.backward_transfer == pytest.approx(-((13 - 10) + (22 - 20)) / 2)
    assert scores.forward_transfer == pytest.approx(-((20 - 18) + (15 - 16)) / 2)
    assert scores.forgetting == pytest.approx((13 - 10, 22 - 20))
    accuracy = summarize([[0.9, 0.1], [0.7, 0.8]], [0.9, 0.85])
    assert accuracy.backward_transfer == pytest.approx(-0.2)
    assert accuracy.forgetting == pytest.approx((0.2,))
    assert accuracy.forward_transfer == pytest.approx(-0.05)


def test_merged_kl_is_the_full_kl_when_the_top_words_cover_the_vocabulary() -> None:
    generator = torch.Generator().manual_seed(0)
    teacher = F.log_softmax(torch.randn(5, 12, generator=generator), -1)
    student = F.log_softmax(torch.randn(5, 12, generator=generator), -1)
    full = F.kl_div(student, teacher, log_target=True, reduction="sum")
    every = teacher.topk(12, dim=-1)
    covered = merged_kl(
        TeacherTokens(every.indices.int(), every.values), student.gather(1, every.indices)
    )
    assert covered.item() == pytest.approx(full.item(), rel=1e-4)
    some = teacher.topk(4, dim=-1)
    merged = merged_kl(
        TeacherTokens(some.indices.int(), some.values), student.gather(1, some.indices)
    )
    assert 0 < merged.item() <= full.item() + 1e-6  # merging outcomes never adds divergence
    same = merged_kl(TeacherTokens(some.indices.int(), some.values), some.values)
    assert same.item() == pytest.approx(0.0, abs=1e-5)


def test_the_teacher_cache_is_the_model_before_the_stage_and_never_changes() -> None:
    torch.manual_seed(0)
    model = tiny_model("llama", causal=True)
    add_adapter(model, "sequence", resolve("lora", {}), train_head=False, seed=0)
    train_adapter(model, "sequence")
    documents = [tuple(range(2 + i, 12 + i)) for i in range(6)]
    stages = [TextStage("old", documents, documents, documents)] * 2
    run = TextStageRun(model, stages, 1, pad_id=0, eval_batch_size=4)
    strategy = TextLogitDistillation(LogitDistillationConfig(temperature=1.0))
    strategy.begin(run)
    assert len(strategy.teacher) == 6
    assert strategy.teacher[0].ids.shape == (9, min(TEACHER_TOP_K, 100))
    before = [(t.ids.clone(), t.log_probs.clone()) for t in strategy.teacher]
    rows = [(1, 0), (1, 1), (0, 2)]
    batch = collate([documents[i] for _, i in rows], 0)
    model.train()
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask")}
    first = strategy.penalty(run, rows, lm_head_input(model, **inputs))
    assert first is not None and first.item() == pytest.approx(0.0, abs=1e-5)  # student = teacher
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
    for _ in range(3):
        logits = model(**{k: batch[k] for k in ("input_ids", "attention_mask")}).logits
        loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), batch["input_ids"][:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    later = strategy.penalty(run, rows, lm_head_input(model, **inputs))
    assert later is not None and later.item() > 1e-4  # the student moved, the teacher did not
    for cached, (ids, log_probs) in zip(strategy.teacher, before, strict=True):
        assert torch.equal(cached.ids, ids) and torch.equal(cached.log_probs, log_probs)
    assert not any(t.log_probs.requires_grad for t in teacher_tokens(run, 1.0))


def test_replay_on_text_draws_earlier_corpora_at_the_rate() -> None:
    documents = [(5, 6, 7)] * 10
    stages = [TextStage(f"s{k}", documents, documents, documents) for k in range(3)]
    run = TextStageRun(torch.nn.Linear(1, 1), stages, 2, pad_id=0, eval_batch_size=4)
    strategy = Replay(ReplayConfig(rate=0.25))
    strategy.begin(run)
    generator = torch.Generator().manual_seed(0)
    drawn = [row for _ in range(10) for row in strategy.replayed(run, 4, generator)]
    assert len(drawn) == math.floor(0.25 * 40)
    assert all(stage < 2 and 0 <= index < 10 for stage, index in drawn)


@pytest.mark.parametrize("strategy", ["sequential", "replay", "kd-logit", "adapter-per-stage"])
def test_a_causal_lm_sequence_fills_a_perplexity_matrix(
    setup: tuple[str, tuple[str, str]], tmp_path: Path, strategy: str
) -> None:
    model, stages = setup
    options = {"rate": 0.5} if strategy == "replay" else {}
    with one_thread():
        result = run_sequence(lm_sequence(model, stages, strategy, **options), tmp_path / "out")
    assert result.metric == "perplexity"
    assert len(result.matrix) == 2 and all(len(row) == 2 for row in result.matrix)
    assert all(math.isfinite(v) and v > 1 for row in result.matrix for v in row)
    for row in result.tests:
        for cell in row:
            assert cell["perplexity"] == pytest.approx(math.exp(cell["loss"]))
    assert result.stages[0].labels == () and result.stages[0].sizes["train"] > 0
    again = SequenceResult.from_dict(result.to_dict())
    assert again.matrix == result.matrix and again.scores == result.scores
    if strategy == "adapter-per-stage":  # stage 0's adapter never trains again
        assert result.matrix[1][0] == result.matrix[0][0]
        assert result.scores.backward_transfer == 0.0


def test_training_on_a_corpus_lowers_its_perplexity(setup: tuple[str, tuple[str, str]]) -> None:
    model, stages = setup
    spec = lm_sequence(model, stages[:1], "sequential")
    with one_thread():
        result = run_sequence(spec, progress=False)
        from adaptlab.continual.corpus_stages import stage_corpus, tokenised
        from adaptlab.models.loading import load_model

        loaded = load_model(model, "causal_lm")
        stage = tokenised(stage_corpus(stages[0], spec, {}), loaded.tokenizer, 16)
        untrained = perplexity(loaded.model, stage.test, loaded.tokenizer.pad_token_id, 8)
    assert result.matrix[0][0] < untrained.perplexity


def test_a_causal_lm_sequence_resumes_after_a_stage(
    setup: tuple[str, tuple[str, str]], tmp_path: Path
) -> None:
    model, stages = setup
    spec = lm_sequence(model, stages, "kd-logit")
    run = stopped_and_resumed(spec, tmp_path)
    whole, resumed = run.whole, run.resumed
    assert run.trained == [1]
    for row, expected in zip(resumed.tests, whole.tests, strict=True):
        assert [c["loss"] for c in row] == pytest.approx([c["loss"] for c in expected], abs=1e-5)


def test_causal_lm_sequences_refuse_classification_only_strategies() -> None:
    with pytest.raises(ConfigError, match="strategy ewc is for classification sequences"):
        lm_sequence("m", ("a", "b"), "ewc")
    with pytest.raises(ConfigError, match="objective must be one of"):
        SequenceSpec.build("m", ["a"], objective="masked-lm")
    plain = SequenceSpec.build("m", ["a"])
    assert "objective" not in plain.to_dict()  # ids of classification sequences are unchanged
    spec = lm_sequence("m", ("a", "b"), "replay")
    assert SequenceSpec.from_dict(spec.to_dict()) == spec and spec.metric == "perplexity"


LM_STUDY = {
    "name": "lifelong",
    "objective": "causal-lm",
    "models": ["smollm2-135m"],
    "sequence": ["reuters-r8", "twitter-sentiment"],
    "methods": ["lora"],
}


def test_a_study_plans_causal_lm_sequences(tmp_path: Path) -> None:
    from adaptlab.study.sequence_plan import plan_sequences
    from adaptlab.study.spec import StudySpec

    data = {**LM_STUDY, "strategies": ["sequential", "kd-logit"]}
    planned = plan_sequences(StudySpec.model_validate(data), tmp_path)
    assert [p.spec.objective for p in planned] == ["causal-lm"] * 2
    with pytest.raises(ValueError, match="strategy ewc is for classification sequences"):
        StudySpec.model_validate({**data, "strategies": ["ewc"]})
    with pytest.raises(ValueError, match="objective is for a sequence study"):
        StudySpec.model_validate({**data, "sequence": [], "strategies": [], "data": ["reuters-r8"]})


def test_the_report_draws_a_perplexity_matrix() -> None:
    image = score_matrix([[30.0, 400.0], [35.0, 90.0]], ["news", "tweets"], "lora", "perplexity")
    svg = base64.b64decode(image.removeprefix("data:image/svg+xml;base64,")).decode()
    assert all(f">{cell}<" in svg or cell in svg for cell in ("30.0", "400.0", "perplexity"))

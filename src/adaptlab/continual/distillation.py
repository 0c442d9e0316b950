"""`kd-logit`: the model keeps giving the answers it gave before the stage (Learning without
Forgetting, Li & Hoiem 2017, §3; logit distillation in Jin et al. 2022).

On the new stage's training examples, each earlier stage's head is pulled towards what the
model before the stage (the teacher) answered: T^2 * KL(softmax(t / T) || softmax(s / T))
(Hinton et al. 2015, §2), averaged over rows and earlier heads, times `weight`. The teacher is
the model itself as the stage begins: its scores on the stage's training set are computed once,
in evaluation mode, and cached, so training runs no second model and no teacher forward per
step; the cost is one forward pass over the stage's training examples.

On a causal-LM sequence, the next-token distribution at every position of the new corpus's
documents is pulled towards the one the model gave before the stage: `weight * T^2 *
KL(p_T || q_T)` per predicted token, averaged over tokens. On an sft or chat sequence the same
term is taken where the stage's loss is, at the positions that predict an answer's tokens (the
completion, the assistant's turns) of the new stage's examples. A vocabulary of 49,152 words
makes the full distributions 200 KB a token, so the teacher's cache keeps each position's
`TEACHER_TOP_K` most likely words and the probability of all the others together, and the KL
is taken over those `TEACHER_TOP_K + 1` outcomes. That is the KL of the two distributions
with the rest of the vocabulary merged into one outcome: never more than the full KL, equal
to it when the student's tail is shaped like the teacher's, and exact in the teacher's top
words. Neither the teacher's cache nor the student's term makes the full (tokens, vocabulary)
logits: both go through the chunked head of `adaptlab.engine.lm_loss` (top-k, and the
log-probabilities at the teacher's words with their gradient).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from adaptlab.continual.corpus_run import TextStageRun, collate, predicted
from adaptlab.continual.labelled_run import HeadOutputs, StageRun
from adaptlab.continual.registry import StrategyEntry, register_strategy
from adaptlab.continual.stages import Row, own_rows
from adaptlab.continual.strategy import Strategy, StrategyConfig, check_number
from adaptlab.engine.batches import batches
from adaptlab.engine.lm_head_capture import LmHeadInput, lm_head_input
from adaptlab.engine.lm_loss import linear_log_probs_at, linear_top_k

TEACHER_TOP_K = 64
"""Words per position the causal-LM teacher cache keeps (the rest merged into one outcome)."""


@dataclass(frozen=True)
class LogitDistillationConfig(StrategyConfig):
    """`weight` of the distillation term; `temperature` softens both distributions (LwF: 2)."""

    name = "kd-logit"
    weight: float = 1.0
    temperature: float = 2.0

    def __post_init__(self) -> None:
        check_number(self.name, "weight", self.weight)
        check_number(self.name, "temperature", self.temperature, positive=True)


class LogitDistillation(Strategy[StageRun, HeadOutputs]):
    """Distil every earlier head's scores from the model as it was before the stage (on a
    classification sequence)."""

    config: LogitDistillationConfig

    def __init__(self, config: LogitDistillationConfig) -> None:
        super().__init__(config)
        self.teacher: list[torch.Tensor] = []
        """Per earlier stage k: the teacher's head-k scores for every training example of the
        stage in training, (examples, labels of k); empty in the first stage."""

    def begin(self, run: StageRun) -> None:
        self.teacher = teacher_scores(run) if run.index else []

    def penalty(
        self, run: StageRun, rows: Sequence[Row], outputs: HeadOutputs
    ) -> torch.Tensor | None:
        if not self.teacher:
            return None
        mine, indices = own_rows(run, rows)
        if not mine:
            return None
        scores = outputs.scores
        at = torch.tensor(indices)
        chosen = torch.tensor(mine, device=scores[0].device)
        temperature = self.config.temperature
        terms = []
        for stage, cached in enumerate(self.teacher):
            student = scores[stage].index_select(0, chosen) / temperature
            target = cached[at].to(student.device) / temperature
            kl = F.kl_div(
                F.log_softmax(student, -1),
                F.log_softmax(target, -1),
                log_target=True,
                reduction="batchmean",
            )
            terms.append(kl * temperature**2)
        return self.config.weight * torch.stack(terms).mean()


@torch.no_grad()
def teacher_scores(run: StageRun) -> list[torch.Tensor]:
    """Every earlier head's scores on the stage's training examples, by the model as it is now
    (evaluation mode, no gradient), on the CPU."""
    model, heads = run.model, run.heads
    device = next(model.parameters()).device
    was_training, was_collecting = model.training, heads.collecting
    model.eval()
    heads.collecting = True
    parts: list[list[torch.Tensor]] = [[] for _ in range(run.index)]
    try:
        for batch in batches(run.stage.encoder, run.stage.train, run.eval_batch_size, device):
            batch.pop("labels", None)
            model(**batch)
            for stage in range(run.index):
                parts[stage].append(heads.outputs[stage].detach().float().cpu())
    finally:
        model.train(was_training)
        heads.collecting, heads.outputs = was_collecting, []
    return [torch.cat(chunks) for chunks in parts]


@dataclass(frozen=True)
class TeacherTokens:
    """The teacher's top words at every predicted position of one document: their ids and
    log-probabilities at temperature T, (positions, TEACHER_TOP_K) each."""

    ids: torch.Tensor
    log_probs: torch.Tensor


class TextLogitDistillation(Strategy[TextStageRun, LmHeadInput]):
    """Distil the next-token distributions of the model as it was before the stage (on a
    causal-LM, sft or chat sequence)."""

    config: LogitDistillationConfig

    def __init__(self, config: LogitDistillationConfig) -> None:
        super().__init__(config)
        self.teacher: list[TeacherTokens] = []
        """Per training document of the stage: the teacher's top words at its predicted
        positions (empty in stage 0)."""

    def begin(self, run: TextStageRun) -> None:
        self.teacher = teacher_tokens(run, self.config.temperature) if run.index else []

    def penalty(
        self, run: TextStageRun, rows: Sequence[Row], head: LmHeadInput
    ) -> torch.Tensor | None:
        """`head`: what the student's LM head read for the batch, from which the term takes
        the log-probabilities at the teacher's words a chunk at a time."""
        if not self.teacher:
            return None
        hidden, cached = [], []
        for position, (stage, index) in enumerate(rows):
            if stage == run.index:
                cached.append(self.teacher[index])
                hidden.append(head.hidden[position, predicted(run.stage.train[index])])
        if not cached:
            return None
        device = head.hidden.device
        teacher = TeacherTokens(
            torch.cat([t.ids for t in cached]).to(device),
            torch.cat([t.log_probs for t in cached]).to(device),
        )
        temperature = self.config.temperature
        student = linear_log_probs_at(
            torch.cat(hidden), head.weight, head.bias, teacher.ids, temperature=temperature
        )
        kl = merged_kl(teacher, student)
        return self.config.weight * temperature**2 * kl / teacher.ids.shape[0]


def merged_kl(teacher: TeacherTokens, student_top: torch.Tensor) -> torch.Tensor:
    """Sum over positions of KL(teacher || student) over the teacher's top words and one
    outcome for all other words; `student_top` (positions, TEACHER_TOP_K) the student's
    log-probabilities at the teacher's top words."""
    top = teacher.log_probs.to(student_top.device)
    kl = (top.exp() * (top - student_top)).sum(-1)
    teacher_rest, student_rest = _rest(top), _rest(student_top)
    kl = kl + teacher_rest.exp() * (teacher_rest - student_rest)
    return kl.sum()


def _rest(log_probs: torch.Tensor) -> torch.Tensor:
    """log(1 - sum(exp(log_probs))) over the last dimension, kept finite."""
    mass = torch.logsumexp(log_probs, dim=-1).clamp(max=-1e-7)
    return torch.log(-torch.expm1(mass))


@torch.no_grad()
def teacher_tokens(run: TextStageRun, temperature: float) -> list[TeacherTokens]:
    """The model's top words at temperature `temperature` at every predicted position of each
    training document of the stage (`predicted`), as it is now (evaluation mode), on the CPU."""
    model, stage = run.model, run.stage
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    cached: list[TeacherTokens] = []
    try:
        for start in range(0, len(stage.train), run.eval_batch_size):
            documents = stage.train[start : start + run.eval_batch_size]
            batch = collate(documents, run.pad_id)
            head = lm_head_input(
                model,
                input_ids=batch["input_ids"].to(device),
                attention_mask=batch["attention_mask"].to(device),
            )
            positions = [predicted(document) for document in documents]
            counts = [len(at) for at in positions]
            hidden = torch.cat([head.hidden[row, at] for row, at in enumerate(positions)])
            k = min(TEACHER_TOP_K, head.weight.shape[0])
            ids, log_probs = linear_top_k(
                hidden, head.weight, head.bias, k, temperature=temperature
            )
            parts = zip(ids.split(counts), log_probs.split(counts), strict=True)
            cached.extend(TeacherTokens(i.int().cpu(), p.cpu()) for i, p in parts)
    finally:
        model.train(was_training)
    return cached


register_strategy(
    StrategyEntry(
        "kd-logit",
        LogitDistillationConfig,
        "the model before the stage distilled: earlier heads' scores, or next-token "
        "distributions on a causal LM (cached teacher)",
        runs_on={
            "classification": LogitDistillation,
            "causal-lm": TextLogitDistillation,
            "sft": TextLogitDistillation,
            "chat": TextLogitDistillation,
        },
    )
)

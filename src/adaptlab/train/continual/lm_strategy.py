"""The strategies of a causal-LM sequence (lifelong pretraining, Jin et al. 2022): what
`sequential`, `replay`, `kd-logit` and `adapter-per-stage` do when every stage is a corpus and
the model a causal LM. They take the same validated configs as the classification strategies.

- `sequential`: one adapter keeps training on each corpus in turn.
- `replay`: earlier corpora's documents join each batch at `rate` (`replay.replay_rows`).
- `adapter-per-stage`: a new named adapter per corpus, earlier ones frozen; corpus j is tested
  with its own adapter (later corpora with the last one trained).
- `kd-logit`: on the new corpus's documents, the next-token distribution at every position is
  pulled towards the one the model gave before the stage: `weight * T^2 * KL(p_T || q_T)` per
  predicted token (Hinton et al. 2015, §2), averaged over tokens. The teacher's distributions
  are computed once as the stage begins and cached; a vocabulary of 49,152 words makes the full
  distributions 200 KB a token, so the cache keeps each position's `TEACHER_TOP_K` most likely
  words and the probability of all the others together, and the KL is taken over those
  `TEACHER_TOP_K + 1` outcomes. That is the KL of the two distributions with the rest of the
  vocabulary merged into one outcome: never more than the full KL, equal to it when the
  student's tail is shaped like the teacher's, and exact in the teacher's top words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from adaptlab.train.continual.distillation import LogitDistillationConfig
from adaptlab.train.continual.lm_stages import TextStageRun, collate
from adaptlab.train.continual.per_stage import route_to_stage, stage_adapter
from adaptlab.train.continual.replay import ReplayConfig, replay_rows
from adaptlab.train.continual.stages import Row
from adaptlab.train.continual.strategy import SEQUENCE_ADAPTER, StrategyConfig

TEACHER_TOP_K = 64
"""Words per position the `kd-logit` teacher cache keeps (the rest merged into one outcome)."""


class TextStrategy:
    """`sequential` on a causal LM; the other strategies override the hooks they need."""

    def __init__(self, config: StrategyConfig) -> None:
        self.config = config

    def adapter_name(self, stage: int) -> str:
        """The adapter stage `stage` trains (added the first time a name comes up)."""
        return SEQUENCE_ADAPTER

    def begin(self, run: TextStageRun) -> None:
        """Called once before stage `run.index` trains."""

    def replayed(self, run: TextStageRun, new_rows: int, generator: torch.Generator) -> list[Row]:
        """Earlier corpora's documents to add to a batch of `new_rows` documents of this one."""
        return []

    def penalty(
        self, run: TextStageRun, rows: Sequence[Row], logits: torch.Tensor
    ) -> torch.Tensor | None:
        """A term added to the batch's loss; `logits` (rows, tokens, vocabulary) the student's."""
        return None

    def route(self, model: nn.Module, stage: int, trained: int) -> None:
        """Make the model ready to be tested on corpus `stage` after stage `trained`."""


class TextReplay(TextStrategy):
    """Mix earlier corpora's documents into every stage's batches."""

    config: ReplayConfig

    def __init__(self, config: ReplayConfig) -> None:
        super().__init__(config)
        self._seen = 0

    def begin(self, run: TextStageRun) -> None:
        self._seen = 0

    def replayed(self, run: TextStageRun, new_rows: int, generator: torch.Generator) -> list[Row]:
        sizes = [len(stage.train) for stage in run.stages[: run.index]]
        rows = replay_rows(self.config.rate, self._seen, new_rows, sizes, generator)
        self._seen += new_rows
        return rows


class TextAdapterPerStage(TextStrategy):
    """Train corpus k's own adapter `stage-k`; test corpus j with `stage-j`."""

    def adapter_name(self, stage: int) -> str:
        return stage_adapter(stage)

    def route(self, model: nn.Module, stage: int, trained: int) -> None:
        route_to_stage(model, stage, trained)


@dataclass(frozen=True)
class TeacherTokens:
    """The teacher's top words at every predicted position of one document: their ids and
    log-probabilities at temperature T, (positions, TEACHER_TOP_K) each."""

    ids: torch.Tensor
    log_probs: torch.Tensor


class TextLogitDistillation(TextStrategy):
    """Distil the next-token distributions of the model as it was before the stage."""

    config: LogitDistillationConfig

    def __init__(self, config: LogitDistillationConfig) -> None:
        super().__init__(config)
        self.teacher: list[TeacherTokens] = []
        """Per training document of the stage: the teacher's top words (empty in stage 0)."""

    def begin(self, run: TextStageRun) -> None:
        self.teacher = teacher_tokens(run, self.config.temperature) if run.index else []

    def penalty(
        self, run: TextStageRun, rows: Sequence[Row], logits: torch.Tensor
    ) -> torch.Tensor | None:
        if not self.teacher:
            return None
        temperature = self.config.temperature
        terms, tokens = [], 0
        for position, (stage, index) in enumerate(rows):
            if stage != run.index:
                continue
            cached = self.teacher[index]
            count = cached.ids.shape[0]
            student = F.log_softmax(logits[position, :count] / temperature, dim=-1)
            terms.append(merged_kl(cached, student))
            tokens += count
        if not terms:
            return None
        return self.config.weight * temperature**2 * torch.stack(terms).sum() / tokens


def merged_kl(teacher: TeacherTokens, student_log_probs: torch.Tensor) -> torch.Tensor:
    """Sum over positions of KL(teacher || student) over the teacher's top words and one
    outcome for all other words; `student_log_probs` (positions, vocabulary)."""
    device = student_log_probs.device
    top = teacher.log_probs.to(device)
    student_top = student_log_probs.gather(-1, teacher.ids.to(device).long())
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
    training document of the stage, as it is now (evaluation mode), on the CPU."""
    model, stage = run.model, run.stage
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    cached: list[TeacherTokens] = []
    try:
        for start in range(0, len(stage.train), run.eval_batch_size):
            documents = stage.train[start : start + run.eval_batch_size]
            batch = collate(documents, run.pad_id)
            logits = model(
                input_ids=batch["input_ids"].to(device),
                attention_mask=batch["attention_mask"].to(device),
            ).logits
            for row, document in enumerate(documents):
                scaled = logits[row, : len(document) - 1].float() / temperature
                log_probs = F.log_softmax(scaled, dim=-1)
                top = log_probs.topk(min(TEACHER_TOP_K, log_probs.shape[-1]), dim=-1)
                cached.append(TeacherTokens(top.indices.int().cpu(), top.values.cpu()))
    finally:
        model.train(was_training)
    return cached


TEXT_STRATEGIES: dict[str, type[TextStrategy]] = {
    "sequential": TextStrategy,
    "replay": TextReplay,
    "kd-logit": TextLogitDistillation,
    "adapter-per-stage": TextAdapterPerStage,
}
"""What each strategy a causal-LM sequence takes does there (`spec.LM_STRATEGIES`)."""


def make_text_strategy(config: StrategyConfig) -> TextStrategy:
    """The causal-LM behaviour of a validated strategy config."""
    return TEXT_STRATEGIES[config.name](config)  # type: ignore[arg-type]

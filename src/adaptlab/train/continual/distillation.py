"""`kd-logit`: the model keeps giving the answers it gave before the stage (Learning without
Forgetting, Li & Hoiem 2017, §3; logit distillation in Jin et al. 2022).

On the new stage's training examples, each earlier stage's head is pulled towards what the
model before the stage (the teacher) answered: T^2 * KL(softmax(t / T) || softmax(s / T))
(Hinton et al. 2015, §2), averaged over rows and earlier heads, times `weight`. The teacher is
the model itself as the stage begins: its scores on the stage's training set are computed once,
in evaluation mode, and cached, so training runs no second model and no teacher forward per
step; the cost is one forward pass over the stage's training examples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from adaptlab.train.batches import batches
from adaptlab.train.continual.stages import HiddenStates, Row, StageRun, own_rows
from adaptlab.train.continual.strategy import (
    Strategy,
    StrategyConfig,
    StrategyEntry,
    check_number,
    register_strategy,
)


@dataclass(frozen=True)
class LogitDistillationConfig(StrategyConfig):
    """`weight` of the distillation term; `temperature` softens both distributions (LwF: 2)."""

    name = "kd-logit"
    weight: float = 1.0
    temperature: float = 2.0

    def __post_init__(self) -> None:
        check_number(self.name, "weight", self.weight)
        check_number(self.name, "temperature", self.temperature, positive=True)


class LogitDistillation(Strategy):
    """Distil every earlier head's scores from the model as it was before the stage."""

    config: LogitDistillationConfig

    def __init__(self, config: LogitDistillationConfig) -> None:
        super().__init__(config)
        self.teacher: list[torch.Tensor] = []
        """Per earlier stage k: the teacher's head-k scores for every training example of the
        stage in training, (examples, labels of k); empty in the first stage."""

    def begin(self, run: StageRun) -> None:
        self.teacher = teacher_scores(run) if run.index else []

    def penalty(
        self,
        run: StageRun,
        rows: Sequence[Row],
        outputs: Sequence[torch.Tensor],
        hidden: HiddenStates | None = None,
    ) -> torch.Tensor | None:
        if not self.teacher:
            return None
        mine, indices = own_rows(run, rows)
        if not mine:
            return None
        at = torch.tensor(indices)
        chosen = torch.tensor(mine, device=outputs[0].device)
        temperature = self.config.temperature
        terms = []
        for stage, cached in enumerate(self.teacher):
            student = outputs[stage].index_select(0, chosen) / temperature
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


register_strategy(
    StrategyEntry(
        "kd-logit",
        LogitDistillationConfig,
        LogitDistillation,
        "earlier heads distilled from the model before the stage (cached scores)",
    )
)

"""A GRPO run (task `grpo`): its questions read and their prompts encoded
(`adaptlab.runs.grpo_data`), the model loaded as a causal LM with its adapter (stacked, it may
be, on an SFT adapter, which is then also the reference), dropout switched off as TRL's
trainers switch it off (the completions are sampled and scored by the same deterministic
policy), the objective built (`GroupRelativeLm`), and after training the test answered
greedily and scored with a sample of the answers kept. An analysis reads answers, which
prompt-only data have none of, so a GRPO run takes none (`GroupRelativePolicy.check_run`)."""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.engine.adapters import attach_adapters
from adaptlab.engine.scale_model import prepare_base
from adaptlab.engine.trained_run import TrainedRun
from adaptlab.errors import ConfigError
from adaptlab.methods.handle import AdaptHandle
from adaptlab.models.decoder import check_causal_lm
from adaptlab.models.loading import load_model
from adaptlab.records.spec import RunSpec
from adaptlab.runs.generative_run import check_trains
from adaptlab.runs.grpo_data import EncodedQuestions, encode_questions
from adaptlab.runs.grpo_objective import GroupRelativeLm
from adaptlab.runs.preference_run import switch_off_dropout
from adaptlab.runs.preparers import prepares
from adaptlab.runs.split_run import SplitRun
from adaptlab.tasks.grpo import GroupRelativePolicy
from adaptlab.tasks.grpo_settings import GrpoSettings


class GrpoRun(SplitRun, GroupRelativeLm):
    """`GroupRelativeLm` over a run's questions, with what `execute` asks (`RunObjective`)."""

    def __init__(
        self,
        spec: RunSpec,
        task: GroupRelativePolicy,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        handle: AdaptHandle,
        data: EncodedQuestions,
        settings: GrpoSettings,
    ) -> None:
        super().__init__(
            model,
            tokenizer,
            settings,
            data.splits["train"],
            data.splits["dev"],
            eval_batch_size=spec.train.eval_batch_size,
            precision=spec.scale.precision,
        )
        self.spec, self.task, self.handle, self.encoded = spec, task, handle, data
        self.description = data.description

    @property
    def trained(self) -> TrainedRun | None:
        """None: prompt-only data hold no answers for an analysis to read."""
        return None


@prepares(GroupRelativePolicy)
def prepare_grpo(task: GroupRelativePolicy, spec: RunSpec, device: torch.device) -> GrpoRun:
    """Read `spec`'s questions, load its model as a causal LM on `device`, adapt it."""
    settings = GrpoSettings.of(spec.data_options, task.name)
    check_causal_lm(spec.model, f"task {task.name}")
    loaded = load_model(spec.model, task.model_kind, seed=spec.train.seed)
    tokenizer = loaded.tokenizer
    data = encode_questions(spec, task, settings, tokenizer)
    model: nn.Module = loaded.model
    _check_window(model, data, settings.generative.max_new_tokens)
    prepare_base(model, spec.scale, device)
    handle = attach_adapters(model, spec, train_head=False)  # the LM head is pretrained
    check_trains(handle, spec, task.name)
    if data.chat_template is not None:  # serving renders chats as training did
        handle.record_chat_template(data.chat_template)
    switch_off_dropout(model)
    return GrpoRun(spec, task, model, tokenizer, handle, data, settings)


def _check_window(model: nn.Module, data: EncodedQuestions, new_tokens: int) -> None:
    """Refuse, before any work, prompts that leave no room in the model's window for
    `new_tokens` more."""
    window = getattr(model.config, "max_position_embeddings", None)
    longest = max(len(prompt) for split in data.splits.values() for prompt in split.prompts)
    if isinstance(window, int) and longest + new_tokens > window:
        raise ConfigError(
            f"a prompt of {longest} tokens and {new_tokens} new tokens are past the "
            f"{window} positions of {type(model).__name__}; lower --max-length or "
            "--max-new-tokens"
        )

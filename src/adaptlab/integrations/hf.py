"""adaptlab inside Hugging Face's training loops: a model adapted here (any method, named
adapters, a Fuse) trains under `transformers.Trainer` or TRL's `SFTTrainer` as it is, the way
a PEFT model does, and `AdapterCheckpointCallback` keeps adaptlab adapter folders beside the
Trainer's checkpoints.

    handle = adaptlab.adapt(model, "lora")    # PEFT: model = get_peft_model(model, LoraConfig())
    trainer = Trainer(model=model, args=args, train_dataset=train,
                      callbacks=[AdapterCheckpointCallback(handle)])
    trainer.train()                           # output_dir/adaptlab-adapter/ at the end

Nothing needs the Trainer changed: adaptlab keeps the model's class and forward, and every
tensor it does not train has `requires_grad` False, which is what the Trainer builds its
optimizer from (only the adapter's tensors reach it). The callback adds what the Trainer cannot
know: an adapter folder at each checkpoint (`checkpoint-N/adaptlab-adapter/`) and at the end
(`output_dir/adaptlab-adapter/`), checkpoints that hold only the trained tensors instead of the
whole model (the Trainer leaves out the model's `_keys_to_ignore_on_save`, and on resume loads
what is there and warns about nothing else), and the running adapters' term of the loss
(AdapterFusion's value penalty, `adaptlab.methods.fusion`) added to the model's own, as
`adaptlab train` adds it. Before anything trains it checks what would go wrong silently or
late (`adaptlab.integrations.hf_checks`): a model that trains more than the adapter, or not
the adapter; a PEFT wrapper; a checkpoint of another adapter; an adapter folder it cannot write.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch import nn
from torch.utils.hooks import RemovableHandle
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from adaptlab.errors import ConfigError
from adaptlab.integrations.hf_checks import (
    check_adapter_folder,
    check_checkpoint,
    check_trainer_model,
    check_trains_only,
)
from adaptlab.methods.adapt import get_handle, regularization_loss
from adaptlab.methods.handle import AdaptHandle
from adaptlab.methods.persistence import save_adapter

ADAPTER_SUBFOLDER = "adaptlab-adapter"
"""Where the callback writes the adapter, inside each checkpoint and inside output_dir."""
CHECKPOINT_PREFIX = "checkpoint"
"""The Trainer's checkpoint folders are `checkpoint-<global step>`."""


class AdapterCheckpointCallback(TrainerCallback):
    """Write adapter `handle` as an adaptlab folder at each Trainer checkpoint and at the end.

    `handle` is what `adaptlab.adapt` / `add_adapter` / `add_fusion` returned, or an adapted
    model (its adapter `name`, or its only one). `base_model_id`, `task` and `label_names` go
    to the manifest (`adaptlab.save_adapter`; by default the model config's name and labels).
    With `slim_checkpoints` the Trainer's own checkpoints hold only the trained tensors (what
    resuming needs, as for a PEFT model), not the frozen base; the model saves whole again
    once training ends. The model must train exactly the adapter (`adaptlab.adapt` and
    `train_adapter` see to it; `add_adapter` alone does not), else the Trainer stops in one line.
    """

    def __init__(
        self,
        handle: AdaptHandle | nn.Module,
        *,
        name: str | None = None,
        base_model_id: str | None = None,
        task: str | None = None,
        label_names: Sequence[str] | None = None,
        slim_checkpoints: bool = True,
    ) -> None:
        if isinstance(handle, AdaptHandle):
            if name is not None and name != handle.name:
                raise ConfigError(
                    f"AdapterCheckpointCallback got the handle of adapter {handle.name!r} and "
                    f"name={name!r}; give one of them"
                )
            self.handle = handle
        elif isinstance(handle, nn.Module):
            self.handle = get_handle(handle, name)
        else:
            raise ConfigError(
                "AdapterCheckpointCallback takes what adaptlab.adapt returned or an adapted "
                f"model, got {type(handle).__name__}"
            )
        self.base_model_id = base_model_id
        self.task = task
        self.label_names = label_names
        self.slim_checkpoints = slim_checkpoints
        self._saved_keys: set[str] | None = None
        self._penalty: RemovableHandle | None = None
        self._loading: RemovableHandle | None = None

    @property
    def model(self) -> nn.Module:
        return self.handle.model

    def on_init_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: Any,
    ) -> None:
        self._check(args, kwargs.get("model"))
        self._slim()  # before a resume loads the checkpoint, so it expects only these tensors
        if self._loading is None:
            self._loading = self.model.register_load_state_dict_pre_hook(self._check_loaded)

    def on_train_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: Any,
    ) -> None:
        self._check(args, kwargs.get("model"))
        self._slim()
        if self._penalty is None:
            self._penalty = self.model.register_forward_hook(_add_penalty)

    def on_save(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: Any,
    ) -> None:
        checkpoint = _output_dir(args) / f"{CHECKPOINT_PREFIX}-{state.global_step}"
        if state.is_world_process_zero:
            self.save(checkpoint / ADAPTER_SUBFOLDER)

    def on_train_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: Any,
    ) -> None:
        if state.is_world_process_zero:
            self.save(_output_dir(args) / ADAPTER_SUBFOLDER)
        for hook in (self._penalty, self._loading):
            if hook is not None:
                hook.remove()
        self._penalty = self._loading = None
        if self._saved_keys is not None:
            model: Any = self.model  # a transformers model: the attribute is its own
            model._keys_to_ignore_on_save = self._saved_keys
            self._saved_keys = None

    def save(self, folder: str | Path) -> Path:
        """Write the adapter (with the adapters its Fuse or Stack needs) to `folder`, a new or
        empty folder or an earlier adapter folder (else one line, `check_adapter_folder`)."""
        check_adapter_folder(Path(folder))
        return save_adapter(
            self.model,
            folder,
            name=self.handle.name,
            base_model_id=self.base_model_id,
            task=self.task,
            label_names=self.label_names,
        )

    def _slim(self) -> None:
        """Make the model's `save_pretrained` (the Trainer's checkpoint) leave out every tensor
        that does not train, remembering the model's own list to give back at the end."""
        if not self.slim_checkpoints or self._saved_keys is not None:
            return
        model: Any = self.model
        trained = set(self.handle.trainable_names)
        frozen = {key for key in model.state_dict() if key not in trained}
        self._saved_keys = set(getattr(model, "_keys_to_ignore_on_save", None) or ())
        model._keys_to_ignore_on_save = self._saved_keys | frozen

    def _check(self, args: TrainingArguments, model: nn.Module | None) -> None:
        """Before anything trains: the Trainer's model, what trains, and where the adapter
        folder goes (`hf_checks`)."""
        check_trainer_model(self.handle, model)
        check_trains_only(self.handle)
        check_adapter_folder(_output_dir(args) / ADAPTER_SUBFOLDER)

    def _check_loaded(self, module: nn.Module, state: dict[str, Any], prefix: str, *_: Any) -> None:
        """Load pre-hook: a checkpoint the Trainer loads into the model fits the adapter."""
        if not prefix:
            check_checkpoint(self.handle, state)


def _output_dir(args: TrainingArguments) -> Path:
    """The Trainer's output folder (where its checkpoints go)."""
    return Path(str(args.output_dir))


def _add_penalty(module: nn.Module, inputs: Any, output: Any) -> Any:
    """Add the running adapters' regularisation to a training forward's loss (the model's
    own loss, which the Trainer reads)."""
    loss = getattr(output, "loss", None)
    if not module.training or loss is None:
        return output
    penalty = regularization_loss(module)
    if penalty is not None:
        output["loss"] = loss + penalty
    return output

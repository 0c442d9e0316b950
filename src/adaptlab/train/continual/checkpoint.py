"""Where a sequence stands, kept on disk after every stage, so a sequence stopped at any moment
(kill -9 included) goes on from its last finished stage instead of from the beginning.

A checkpoint folder holds `stage-K/` for the last finished stage K: `progress.json` (the spec,
every finished stage's training record and matrix row), `state.safetensors` (every tensor
any finished stage trained: adapters and heads, the whole model for methods that train it) and
`strategy.safetensors` (what the strategy carries from stage to stage: EWC's quadratics).
Every other tensor comes back from the seeds when the model is built again. Each `stage-K/` is
written in a staging folder and renamed into place, so a folder that exists is complete. The
single-stage scores (forward transfer) go to `single.json` as each one is measured.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
from torch import nn

from adaptlab.errors import ConfigError
from adaptlab.fileio import atomic_write, publish_folder, staging_folder
from adaptlab.train.continual.result import StageOutcome
from adaptlab.train.continual.spec import SequenceSpec
from adaptlab.train.ranks import is_main_process

PROGRESS_FILE = "progress.json"
STATE_FILE = "state.safetensors"
STRATEGY_FILE = "strategy.safetensors"
SINGLE_FILE = "single.json"
_STAGE = "stage-"


@dataclass
class SequenceCheckpoint:
    """The finished stages of one sequence in `folder` (none yet for a new folder)."""

    folder: Path
    spec: SequenceSpec
    completed: list[StageOutcome] = field(default_factory=list)
    single_stage: list[float] = field(default_factory=list)
    trained: set[str] = field(default_factory=set)
    """Names of the model's tensors some finished stage trained (those `state` holds)."""

    @classmethod
    def open(cls, folder: str | os.PathLike[str], spec: SequenceSpec) -> SequenceCheckpoint:
        """The checkpoint in `folder`, which must be of `spec` if it holds one."""
        checkpoint = cls(Path(folder), spec)
        last = checkpoint._last()
        if last is not None:
            where = str(last / PROGRESS_FILE)
            data = _read_json(last / PROGRESS_FILE)
            if data.get("spec") != spec.to_dict():
                raise ConfigError(f"{checkpoint.folder} holds the state of another sequence")
            checkpoint.completed = [
                StageOutcome.from_dict(stage, f"{where}: stages[{index}]")
                for index, stage in enumerate(data.get("stages", []))
            ]
            checkpoint.trained = set(data.get("trained", []))
        single = checkpoint.folder / SINGLE_FILE
        if single.is_file():
            checkpoint.single_stage = [float(v) for v in _read_json(single)["scores"]]
        return checkpoint

    def restore(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """Load the last finished stage's trained tensors into `model` (built as that stage
        left it: its heads installed and every adapter so far added); return the strategy's
        state saved with them."""
        last = self._last()
        if last is None:
            return {}
        tensors = safetensors.torch.load_file(str(last / STATE_FILE))
        params = dict(model.named_parameters())
        with torch.no_grad():
            for name, tensor in tensors.items():
                if name not in params or params[name].shape != tensor.shape:
                    raise ConfigError(f"{last / STATE_FILE}: tensor {name} does not fit the model")
                params[name].copy_(tensor)
        return safetensors.torch.load_file(str(last / STRATEGY_FILE))

    def save_stage(
        self,
        outcome: StageOutcome,
        model: nn.Module,
        trained: set[str],
        strategy_state: dict[str, torch.Tensor],
    ) -> None:
        """Keep `outcome`, the model's trained tensors and the strategy's state as the last
        finished stage."""
        self.completed.append(outcome)
        self.trained |= trained
        if not is_main_process():  # one writer in a multi-process run
            return
        target = self.folder / f"{_STAGE}{len(self.completed) - 1}"
        staging = staging_folder(target)
        try:
            state = {
                name: param.detach().to("cpu", copy=True).contiguous()
                for name, param in model.named_parameters()
                if name in self.trained
            }
            safetensors.torch.save_file(state, str(staging / STATE_FILE))
            carried = {k: t.detach().to("cpu").contiguous() for k, t in strategy_state.items()}
            safetensors.torch.save_file(carried, str(staging / STRATEGY_FILE))
            progress = {
                "spec": self.spec.to_dict(),
                "stages": [stage.to_dict() for stage in self.completed],
                "trained": sorted(self.trained),
            }
            (staging / PROGRESS_FILE).write_text(json.dumps(progress))
            publish_folder(staging, target)
        finally:
            if staging.exists():
                shutil.rmtree(staging)
        for older in self._stage_folders()[:-1]:
            shutil.rmtree(older)

    def save_single(self, score: float) -> None:
        """Keep the next single-stage score."""
        self.single_stage.append(score)
        if not is_main_process():
            return
        payload = json.dumps({"scores": self.single_stage}).encode("utf-8")
        atomic_write(self.folder / SINGLE_FILE, payload)

    def _stage_folders(self) -> list[Path]:
        if not self.folder.is_dir():
            return []
        found = [
            path
            for path in self.folder.iterdir()
            if path.name.startswith(_STAGE) and path.name.removeprefix(_STAGE).isdigit()
        ]
        return sorted(found, key=lambda path: int(path.name.removeprefix(_STAGE)))

    def _last(self) -> Path | None:
        folders = self._stage_folders()
        return folders[-1] if folders else None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ConfigError(f"cannot read {path}: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return data

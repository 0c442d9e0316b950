"""Where a sequence stands, kept on disk after every stage, so a sequence stopped at any moment
(kill -9 included) goes on from its last finished stage instead of from the beginning.

A checkpoint folder holds `stage-K/` for the last finished stage K: `progress.json` (the spec,
every finished stage's training record and matrix row), `state.safetensors` (every tensor
any finished stage trained: adapters and heads, the whole model for methods that train it) and
`strategy.safetensors` (what the strategy carries from stage to stage: EWC's quadratics).
Every other tensor comes back from the seeds when the model is built again. Each `stage-K/` is
written in a staging folder and renamed into place, so a folder that exists is complete. The
single-stage scores (forward transfer) go to `single.json` as each one is measured.

What a checkpoint folder holds is read back as untrusted input: its files must be regular files
(no links), `progress.json` must hold exactly its fields with as many stages as its folder's
number says (at most the sequence's), the tensors must be the ones it names, each of the
model's shape and dtype and finite, and the single-stage scores finite and no more than the
stages after the first. Anything else ends in one line naming the file.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
from safetensors import SafetensorError
from torch import nn

from adaptlab.continual.result import StageOutcome
from adaptlab.continual.spec import SequenceSpec
from adaptlab.errors import ConfigError
from adaptlab.fileio import atomic_write, publish_folder, staging_folder
from adaptlab.parallel.ranks import is_main_process
from adaptlab.records.jsonfields import JsonObject

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
        _check_folder(checkpoint.folder)
        last = checkpoint._last()
        if last is not None:
            path = last / PROGRESS_FILE
            data = _read_json(path)
            if data.get("spec") != spec.to_dict():
                raise ConfigError(f"{checkpoint.folder} holds the state of another sequence")
            progress = JsonObject(data, str(path))
            progress.refuse_unknown(("spec", "stages", "trained"))
            checkpoint.completed = [
                StageOutcome.from_dict(stage.data, f"{path}: stages[{index}]")
                for index, stage in enumerate(progress.objects("stages"))
            ]
            finished = int(last.name.removeprefix(_STAGE)) + 1
            if len(checkpoint.completed) != finished or finished > len(spec.stages):
                raise ConfigError(
                    f"{path}: stages: {len(checkpoint.completed)} finished stages in "
                    f"{last.name} of a sequence of {len(spec.stages)}; {_AFRESH}"
                )
            checkpoint.trained = set(progress.texts("trained"))
        single = checkpoint.folder / SINGLE_FILE
        if single.is_symlink() or single.exists():
            checkpoint.single_stage = _single_scores(single, len(spec.stages))
        return checkpoint

    def restore(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """Load the last finished stage's trained tensors into `model` (built as that stage
        left it: its heads installed and every adapter so far added); return the strategy's
        state saved with them."""
        last = self._last()
        if last is None:
            return {}
        tensors = _read_tensors(last / STATE_FILE)
        params = dict(model.named_parameters())
        for name in sorted(self.trained | set(tensors)):
            param, tensor = params.get(name), tensors.get(name)
            if param is None or tensor is None:
                problem = "not a tensor of the model" if param is None else "missing"
                raise ConfigError(f"{last / STATE_FILE}: {name}: {problem}; {_AFRESH}")
            if (param.shape, param.dtype) != (tensor.shape, tensor.dtype):
                raise ConfigError(
                    f"{last / STATE_FILE}: {name}: {tensor.dtype} of shape {list(tensor.shape)}, "
                    f"the model's is {param.dtype} of {list(param.shape)}; {_AFRESH}"
                )
        carried = _read_tensors(last / STRATEGY_FILE)
        with torch.no_grad():
            for name, tensor in tensors.items():
                params[name].copy_(tensor)
        return carried

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


_AFRESH = "remove the checkpoint folder to start the sequence afresh"


def _check_folder(folder: Path) -> None:
    """Fail unless `folder` is absent or a folder whose stage folders are folders, no links."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise ConfigError(f"the checkpoint folder {folder} is a file or a link; give a folder")
    if folder.is_dir():
        for entry in folder.iterdir():
            numbered = entry.name.removeprefix(_STAGE).isdigit()
            if (
                entry.name.startswith(_STAGE)
                and numbered
                and (entry.is_symlink() or not entry.is_dir())
            ):
                raise ConfigError(f"{entry} is a file or a link, not a stage's folder; {_AFRESH}")


def _read_json(path: Path) -> dict[str, Any]:
    """The JSON object in the regular file `path`, or one line."""
    if path.is_symlink() or not path.is_file():
        raise ConfigError(f"{path} is not a file adaptlab wrote; {_AFRESH}")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ConfigError(f"cannot read {path}: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return data


def _single_scores(path: Path, stages: int) -> list[float]:
    """The single-stage scores in `path`: finite, at most one per stage after the first."""
    scores = JsonObject(_read_json(path), str(path))
    scores.refuse_unknown(("scores",))
    values = scores.data.get("scores")
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values
    ):
        raise ConfigError(f"{path}: scores: expected a list of finite numbers; {_AFRESH}")
    if len(values) > stages - 1:
        raise ConfigError(
            f"{path}: scores: {len(values)} single-stage scores for the {stages - 1} stages "
            f"after the first; {_AFRESH}"
        )
    return [float(v) for v in values]


def _read_tensors(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of the regular file `path`, every one finite; else one line."""
    if path.is_symlink() or not path.is_file():
        raise ConfigError(f"{path} is not a file adaptlab wrote; {_AFRESH}")
    try:
        tensors = safetensors.torch.load_file(str(path))
    except (SafetensorError, OSError) as error:
        raise ConfigError(f"cannot read {path} ({error}); {_AFRESH}") from None
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ConfigError(f"{path}: {name}: holds values that are not finite; {_AFRESH}")
    return tensors

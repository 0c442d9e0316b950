"""What `AdapterCheckpointCallback` checks so that a Trainer run it is part of either trains the
adapter as asked or stops in one line: the Trainer trains the adapted model itself (no PEFT
wrapper around it), exactly the adapter's tensors train and the adapter runs, the adapter
folders can be written, and a checkpoint the Trainer loads holds this adapter's tensors, whole
and finite."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from adaptlab.backbone.parts import INSERTED
from adaptlab.errors import AdapterFileError, ConfigError
from adaptlab.methods.handle import AdaptHandle
from adaptlab.methods.manifest import MANIFEST, MEMBERS, TENSORS
from adaptlab.methods.state import get_state
from adaptlab.paths import check_not_link, check_own_folder, check_writable, listed

ADAPTER_ENTRIES = (MANIFEST, TENSORS, MEMBERS)
"""What an adapter folder written by `save_adapter` holds."""
RESUME = "adapt the model as it was when the checkpoint was written, then resume"


def check_trainer_model(handle: AdaptHandle, model: nn.Module | None) -> None:
    """The Trainer trains the model the adapter is on (a PEFT or other wrapper would train
    something else and hide the adapter from adaptlab's folders)."""
    if model is None or model is handle.model:
        return
    unwrap = getattr(model, "get_base_model", None)
    if callable(unwrap) and unwrap() is handle.model:
        raise ConfigError(
            f"the Trainer wraps the adapted model in a {type(model).__name__} (a peft_config "
            "given to SFTTrainer, or get_peft_model), which changed it in place; adaptlab's "
            f"adapter {handle.name!r} is what trains: build and adapt the model again and give "
            "the Trainer no peft_config"
        )
    raise ConfigError(
        f"AdapterCheckpointCallback was made for adapter {handle.name!r} of a "
        f"{type(handle.model).__name__}, but the Trainer trains a {type(model).__name__}; "
        "give the Trainer the adapted model itself"
    )


def check_trains_only(handle: AdaptHandle) -> None:
    """The adapter runs, and the tensors that train (what the Trainer's optimizer gets) are
    exactly its own: `add_adapter` leaves the base model trainable and the adapter off."""
    model, name = handle.model, handle.name
    state = get_state(model)
    running = {unit.name for unit in state.units_in(state.active)} if state else set()
    own = {id(tensor) for tensor in handle.tensors().values()}
    trainable = {tensor: p for tensor, p in model.named_parameters() if p.requires_grad}
    extra = [tensor for tensor, p in trainable.items() if id(p) not in own]
    training = {id(p) for p in trainable.values()}
    idle = [tensor for tensor, p in handle.tensors().items() if id(p) not in training]
    problems = []
    if name not in running:
        runs = "the base model alone" if state is None or state.active is None else state.active
        problems.append(f"adapter {name!r} does not run (what runs: {runs!s})")
    if extra:
        problems.append(
            f"{len(extra)} tensors outside adapter {name!r} would train ({listed(extra)})"
        )
    if idle:
        problems.append(f"{len(idle)} tensors of adapter {name!r} would not ({listed(idle)})")
    if problems:
        raise ConfigError(
            f"{'; '.join(problems)}: call adaptlab.train_adapter(model, {name!r}) before "
            "training, so that the adapter runs and only it trains"
        )


def check_adapter_folder(folder: Path) -> None:
    """`folder` can take an adapter folder: new, empty, or an earlier adapter folder (which is
    replaced); never a file, a link or a folder holding anything else."""
    check_not_link(folder, "the adapter folder")
    if folder.exists() and not folder.is_dir():
        raise ConfigError(
            f"{folder} is a file, where AdapterCheckpointCallback writes the adapter folder; "
            "move it away or give the Trainer another output_dir"
        )
    check_own_folder(folder, "the adapter folder", lambda entry: entry.name in ADAPTER_ENTRIES)
    check_writable(folder, "the adapter folder", "give the Trainer an output_dir you can write")


def check_checkpoint(handle: AdaptHandle, tensors: Mapping[str, torch.Tensor]) -> None:
    """A state the Trainer loads into the model (a checkpoint it resumes from, or its best
    one) holds every tensor the adapter trains, in the model's shapes and finite, and no
    adaptlab tensor the model does not have (another adapter's)."""
    model = handle.model.state_dict()
    missing = [name for name in handle.trainable_names if name not in tensors]
    foreign = [name for name in tensors if name not in model]
    if missing or foreign:
        raise AdapterFileError(_mismatch(handle, missing, foreign))
    for name in handle.trainable_names:
        found, wanted = tensors[name], model[name]
        if found.shape != wanted.shape:
            raise AdapterFileError(
                f"checkpoint tensor {name} is {tuple(found.shape)}, the model's "
                f"{tuple(wanted.shape)} (another configuration of {_described(handle)}); "
                f"{RESUME}"
            )
        if found.is_floating_point() and not bool(torch.isfinite(found).all()):
            raise AdapterFileError(
                f"checkpoint tensor {name} holds NaN or infinite values (a diverged or damaged "
                "checkpoint); resume from an earlier checkpoint"
            )


def _mismatch(handle: AdaptHandle, missing: list[str], foreign: list[str]) -> str:
    """The one line for a checkpoint of other tensors: the adapters and methods it holds, or
    the tensors it lacks and the ones it has that the model does not."""
    theirs = _adapters(foreign)
    if theirs:
        return f"the checkpoint holds {theirs}, but the model trains {_described(handle)}; {RESUME}"
    parts = []
    if missing:
        parts.append(f"lacks {len(missing)} of its tensors ({listed(missing)})")
    if foreign:
        parts.append(f"holds {len(foreign)} the model does not have ({listed(foreign)})")
    return f"the checkpoint does not fit {_described(handle)}: it {' and '.join(parts)}; {RESUME}"


def _described(handle: AdaptHandle) -> str:
    """`adapter 'default' (lora)`."""
    return f"adapter {handle.name!r} ({'+'.join(handle.method_names) or 'fusion'})"


def _adapters(names: list[str]) -> str:
    """The adapters and methods that inserted tensors `names` belong to: `adapter 'default'
    (lora)`; "" when none is adaptlab's."""
    methods: dict[str, set[str]] = {}
    for name in names:
        _, marker, rest = name.partition(f".{INSERTED}.")
        adapter, _, tail = rest.partition(".")
        if marker and tail:
            methods.setdefault(adapter, set()).add(tail.partition(".")[0])
    return ", ".join(f"adapter {a!r} ({'+'.join(sorted(m))})" for a, m in methods.items())

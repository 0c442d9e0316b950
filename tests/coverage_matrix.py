"""The coverage matrix: every method on a tiny model of every family, checked end to end, and
the table `docs/coverage.md` is made of.

One cell (`check_cell`) adapts a fresh model, then checks what the method promises:
identity at the start (where it promises it), that one training step changes the adapter's
tensors and nothing else while the base model stays as it was, that save -> load gives the same
logits, that merging changes nothing (mergeable methods), and, for LoRA, that PEFT loads the
exported adapter to the same logits. A method that cannot go on a family must refuse in one
line (a `ConfigError` or `BackboneError`): the cell then holds that line.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from model_zoo import Family
from torch import nn

import adaptlab
from adaptlab.errors import BackboneError, ConfigError

ATOL, RTOL = 1e-5, 1e-4


@dataclass(frozen=True)
class Column:
    """A method as the matrix applies it: its name, options and promises."""

    name: str
    method: str
    options: dict[str, Any]
    identity: bool = True
    mergeable: bool = False
    peft: bool = False


COLUMNS = (
    Column("full", "full", {}),
    Column("head", "head", {}),
    Column("freeze", "freeze", {"k": 1}),
    Column("bitfit", "bitfit", {}),
    Column("lnfit", "lnfit", {}),
    Column("houlsby", "houlsby", {"hidden_size": 8}),
    Column("pfeiffer", "pfeiffer", {}),
    Column("parallel", "parallel", {"hidden_size": 8}),
    Column("lora", "lora", {"rank": 4}, mergeable=True, peft=True),
    Column("dora", "lora", {"rank": 4, "dora": True}, mergeable=True),
    Column("ia3", "ia3", {}, mergeable=True),
    Column("prefix", "prefix", {"length": 4, "reparam_hidden": 16}, identity=False),
    Column(
        "mam", "mam", {"prefix_length": 4, "hidden_size": 8, "reparam_hidden": 16}, identity=False
    ),
    Column("lst", "lst", {}, identity=False),
)
REQUIRED = ("lora", "houlsby", "ia3")
"""Columns every family of the matrix must pass."""


@dataclass(frozen=True)
class Cell:
    """One family x method: passed (reason None) or refused in one line (the reason)."""

    family: str
    column: str
    model: str
    """The model's class, which a refusal names."""
    reason: str | None = None
    peft: str | None = None
    """For a PEFT column: None when PEFT loads the export to the same logits, else why not."""


def logits(model: nn.Module, family: Family) -> torch.Tensor:
    with torch.no_grad():
        return model(**family.inputs()).logits  # type: ignore[no-any-return]


def close(a: torch.Tensor, b: torch.Tensor, what: str, family: Family, column: Column) -> None:
    """Equal logits, up to float rounding (merging and unmerging multiply and divide)."""
    gap = ((a - b).abs() - RTOL * b.abs()).max().item()
    assert gap <= ATOL, f"{family.name} x {column.name}: {what} differs by {gap:.3g}"


def check_cell(family: Family, column: Column) -> Cell:
    """Run one cell's checks; a refusal becomes the cell's reason, anything else raises."""
    model = family.model()
    base = logits(model, family)
    try:
        handle = adaptlab.adapt(model, column.method, **column.options)
    except (ConfigError, BackboneError) as refusal:
        reason = str(refusal)
        assert "\n" not in reason, f"{family.name} x {column.name}: a refusal of several lines"
        return Cell(family.name, column.name, type(model).__name__, reason)
    if column.identity:
        close(logits(model, family), base, "the adapted model at start", family, column)
    trained = _train_step(model, family, column, handle)
    with adaptlab.disabled(model):
        close(logits(model, family), base, "the base model after training", family, column)
    with tempfile.TemporaryDirectory() as folder:
        adaptlab.save_adapter(model, folder)
        loaded = adaptlab.load_adapter(family.model(), folder)
        close(logits(loaded, family), trained, "the loaded adapter", family, column)
    if column.mergeable:
        adaptlab.merge(model)
        merged = logits(model, family)
        adaptlab.unmerge(model)
        close(merged, trained, "the merged adapter", family, column)
        close(logits(model, family), trained, "the unmerged adapter", family, column)
    peft = _peft(model, family, trained) if column.peft else None
    return Cell(family.name, column.name, type(model).__name__, peft=peft)


def _train_step(
    model: nn.Module, family: Family, column: Column, handle: adaptlab.AdaptHandle
) -> torch.Tensor:
    """One AdamW step; only the adapter's tensors may change, and some must. Returns the
    trained model's logits."""
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainable = set(handle.tensors())
    model.train()
    parameters = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=1e-2)
    family.loss(model).backward()
    optimizer.step()
    model.eval()
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    outside = sorted(changed - trainable)
    assert not outside, f"{family.name} x {column.name}: the step changed {outside[:3]}"
    assert changed, f"{family.name} x {column.name}: the step changed nothing"
    return logits(model, family)


def _peft(model: nn.Module, family: Family, trained: torch.Tensor) -> str | None:
    """None when PEFT loads the exported adapter to the same logits, else PEFT's refusal."""
    import peft

    from adaptlab.methods.peft_format import export_peft

    with tempfile.TemporaryDirectory() as folder:
        try:
            export_peft(model, folder)
        except ConfigError as refusal:
            return str(refusal)
        loaded = peft.PeftModel.from_pretrained(family.model(), folder)
        gap = (logits(loaded, family) - trained).abs().max().item()
    assert gap <= ATOL, f"{family.name}: PEFT's load of the export differs by {gap:.3g}"
    return None


def run_matrix(
    families: tuple[Family, ...], progress: Callable[[str], None] | None = None
) -> dict[tuple[str, str], Cell | BaseException]:
    """Every cell: its result, or the exception a failed check raised."""
    cells: dict[tuple[str, str], Cell | BaseException] = {}
    for family in families:
        for column in COLUMNS:
            try:
                cells[family.name, column.name] = check_cell(family, column)
            except Exception as failure:  # reported by the cell's own test
                cells[family.name, column.name] = failure
        if progress is not None:
            progress(family.name)
    return cells

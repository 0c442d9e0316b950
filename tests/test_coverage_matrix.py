"""Every method on a tiny model of every family (`coverage_matrix`), the roles of fused layers
checked against what attention does, and `docs/coverage.md` kept equal to what the tests find."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers
from coverage_matrix import COLUMNS, REQUIRED, Cell, run_matrix
from coverage_sweep import sweep
from coverage_table import render
from model_zoo import FAMILIES, Family

import adaptlab

DOCS = Path(__file__).parents[1] / "docs" / "coverage.md"
NAMES = [family.name for family in FAMILIES]


@pytest.fixture(scope="module")
def matrix() -> dict[tuple[str, str], Cell | BaseException]:
    return run_matrix(FAMILIES)


@pytest.mark.parametrize("family", NAMES)
def test_every_method_works_or_refuses_in_one_line(
    family: str, matrix: dict[tuple[str, str], Cell | BaseException]
) -> None:
    for column in COLUMNS:
        cell = matrix[family, column.name]
        if isinstance(cell, BaseException):
            raise cell
        if column.name in REQUIRED:
            assert cell.reason is None, f"{family} x {column.name}: {cell.reason}"
        if column.peft and cell.reason is None:
            assert cell.peft is None, f"{family}: PEFT export refused: {cell.peft}"


def first_attention(model: torch.nn.Module, family: Family) -> torch.Tensor:
    """The first block's attention probabilities on the family's inputs."""
    with torch.no_grad():
        out = model(**family.inputs(), output_attentions=True)
    found = getattr(out, "encoder_attentions", None) or out.attentions
    return found[0]  # type: ignore[no-any-return]


@pytest.mark.parametrize("family", NAMES)
def test_lora_on_values_leaves_attention_alone_and_on_queries_or_keys_does_not(
    family: str,
) -> None:
    """On a fused query-key-value layer the roles must own the rows the family's attention
    reads them from: an update of the value's rows cannot move the attention probabilities,
    an update of the query's or the key's must."""
    zoo = {f.name: f for f in FAMILIES}[family]
    for role, moves in (("value", False), ("query", True), ("key", True)):
        model = zoo.model()
        base = first_attention(model, zoo)
        adaptlab.adapt(model, "lora", targets=(role,), rank=2)
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if name.endswith(".B"):
                    parameter.copy_(10 * torch.randn(parameter.shape, generator=generator))
        gap = (first_attention(model, zoo) - base).abs().max().item()
        assert (gap > 1e-4) if moves else (gap < 1e-6), f"{family}: {role} moved attention {gap}"


def test_the_docs_table_is_what_the_tests_find(
    matrix: dict[tuple[str, str], Cell | BaseException],
) -> None:
    failed = [key for key, cell in matrix.items() if isinstance(cell, BaseException)]
    assert not failed, f"cells failed: {failed[:5]}"
    cells = {key: cell for key, cell in matrix.items() if isinstance(cell, Cell)}
    page = render(cells, sweep(), transformers.__version__)
    current = DOCS.read_text(encoding="utf-8") if DOCS.exists() else None
    if current != page:
        DOCS.write_text(page, encoding="utf-8")
        pytest.fail(f"{DOCS} did not say what the tests find; it is rewritten: commit it")

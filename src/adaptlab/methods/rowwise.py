"""Inserted modules that act on some rows of their layer: the part of a fused layer they target.

A module made for a whole layer acts on every output; one made for a part of a fused layer
(`adaptlab.backbone.rows`) reads and writes only that part's rows, of the layer's output
(last dimension) and of its (out, in) weight (first dimension). With no rows every helper is
the plain operation, so a method written on these helpers serves both.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from adaptlab.backbone.rows import Rows
from adaptlab.methods.site import SiteModule


class RowWise(SiteModule):
    """An inserted module acting on `rows` of its layer's outputs (all of them for None)."""

    @classmethod
    def joint_output(
        cls, parts: Sequence[RowWise], h: torch.Tensor, x: torch.Tensor
    ) -> torch.Tensor | None:
        """The output of several parts of one fused layer at once, when computing them together
        is cheaper than one after another (`adaptlab.methods.sliced`); None: one after another."""
        return None

    def __init__(self, rows: Rows | None = None) -> None:
        super().__init__()
        self.rows = rows
        self.row_index: torch.Tensor | None
        if rows is None:
            self.row_index = None
        else:
            self.register_buffer("row_index", rows.indices(), persistent=False)

    def own_rows(self, tensor: torch.Tensor, dim: int = 0) -> torch.Tensor:
        """This module's rows of `tensor` along `dim` (a weight's first, an output's last)."""
        return tensor if self.row_index is None else tensor.index_select(dim, self.row_index)

    def add_rows(self, h: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        """h with `delta` added to this module's rows of its last dimension."""
        if self.row_index is None:
            return h + delta
        return h.index_add(-1, self.row_index, delta.to(h.dtype))

    def put_rows(self, h: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """h with this module's rows of its last dimension replaced by `rows`."""
        if self.row_index is None:
            return rows
        return h.index_copy(-1, self.row_index, rows.to(h.dtype))

    def add_rows_(self, weight: torch.Tensor, delta: torch.Tensor) -> None:
        """Add `delta` to this module's rows of an (out, in) weight, in place."""
        if self.row_index is None:
            weight += delta
        else:
            weight.index_add_(0, self.row_index, delta)

    def put_rows_(self, weight: torch.Tensor, rows: torch.Tensor) -> None:
        """Write `rows` into this module's rows of an (out, in) weight, in place."""
        if self.row_index is None:
            weight.copy_(rows)
        else:
            weight.index_copy_(0, self.row_index, rows)

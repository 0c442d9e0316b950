"""The output rows of a fused projection that one role owns.

A fused query-key-value (or gate-up) layer computes several projections in one matrix; which
of its outputs belong to the query depends on the family: one block per role (GPT-2's
[q | k | v], Phi-3's), one run per head ((heads, 3, head_dim): GPT-NeoX, BLOOM), one run per
key-value group (Falcon's new architecture). Each is `count` runs of `length` rows, `stride`
apart, starting at `offset`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Rows:
    """`count` runs of `length` consecutive rows, `stride` rows apart, from row `offset`."""

    offset: int
    length: int
    stride: int = 0
    count: int = 1

    @classmethod
    def block(cls, start: int, stop: int) -> Rows:
        """The rows start..stop-1."""
        return cls(offset=start, length=stop - start)

    @property
    def size(self) -> int:
        """How many rows."""
        return self.length * self.count

    @property
    def end(self) -> int:
        """One past the last row."""
        return self.offset + (self.count - 1) * self.stride + self.length

    def indices(self, device: torch.device | str | None = None) -> torch.Tensor:
        """The row numbers, in order."""
        starts = self.offset + self.stride * torch.arange(self.count, device=device)
        return (starts[:, None] + torch.arange(self.length, device=device)[None, :]).reshape(-1)

"""The CPU threads a run computed with, as its record keeps them: a run beside other work is
read knowing how it shared the machine."""

from __future__ import annotations

import os
from dataclasses import dataclass

from adaptlab.records.jsonfields import JsonObject
from adaptlab.threads import SOURCE_VARIABLE, THREADS_VARIABLE, WAIT_VARIABLE, chosen_threads

TORCH_OWN = "torch's own: adaptlab.share_cpus() was not called"
"""The source of a count adaptlab did not choose: a library user's process."""
HANDED = "the process that started this one"
SPINNING = "unset (OpenMP's default: waiting threads spin)"


@dataclass(frozen=True)
class ThreadUse:
    """Intra-op and inter-op threads, OpenMP's wait policy, and where the count came from."""

    threads: int
    interop_threads: int
    wait_policy: str
    source: str

    @classmethod
    def current(cls) -> ThreadUse:
        """What this process computes with (it has run a model: torch is loaded already)."""
        import torch

        chosen = chosen_threads()
        if chosen is not None:
            source = chosen.source
        elif THREADS_VARIABLE in os.environ:  # a Ray task or replica adaptlab started
            source = os.environ.get(SOURCE_VARIABLE) or HANDED
        else:
            source = TORCH_OWN
        return cls(
            threads=torch.get_num_threads(),
            interop_threads=torch.get_num_interop_threads(),
            wait_policy=os.environ.get(WAIT_VARIABLE) or SPINNING,
            source=source,
        )

    def describe(self) -> str:
        return (
            f"{self.threads} threads ({self.source}), {self.interop_threads} inter-op, "
            f"OpenMP wait policy {self.wait_policy}"
        )

    def to_dict(self) -> dict[str, int | str]:
        return {
            "threads": self.threads,
            "interop_threads": self.interop_threads,
            "wait_policy": self.wait_policy,
            "source": self.source,
        }

    @classmethod
    def from_json(cls, row: JsonObject) -> ThreadUse:
        row.refuse_unknown(("threads", "interop_threads", "wait_policy", "source"))
        return cls(
            row.integer("threads", least=1),
            row.integer("interop_threads", least=1),
            row.text("wait_policy"),
            row.text("source"),
        )

"""Progress of long loops: a live bar on a terminal; anywhere else (a log file, CI, nohup) a
plain line every tenth of the way, or where the caller marks one (once per epoch, say), and
never the carriage-return updates a live bar would write there by the hundred."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable, Iterator, Sized
from typing import IO, TypeVar

from tqdm.auto import tqdm

Item = TypeVar("Item")

LINES = 10
"""Plain lines over a whole loop when the caller marks none itself."""


class Progress:
    """Counts steps towards `total`; shows them live on a terminal, in plain lines elsewhere.

    `lines` plain lines are spread evenly over the loop (0: only where `line()` is called).
    """

    def __init__(
        self,
        total: int | None,
        desc: str = "",
        unit: str = "it",
        *,
        enabled: bool = True,
        lines: int = LINES,
        stream: IO[str] | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.total, self.desc, self.unit = total, desc, unit
        self.done = 0
        self._values: dict[str, str] = {}
        self._began = time.perf_counter()
        self._printed_at = 0
        live = enabled and self.stream.isatty()
        self._bar = (
            tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True, file=self.stream)
            if live
            else None
        )
        self._every = math.ceil(total / lines) if total and lines > 0 else 0

    def update(self, steps: int = 1) -> None:
        """Count `steps` more done."""
        self.done += steps
        if self._bar is not None:
            self._bar.update(steps)
        elif self._every and self.done // self._every > self._printed_at // self._every:
            self.line()

    def describe(self, desc: str) -> None:
        """Change the text before the count (`epoch 2/10`)."""
        self.desc = desc
        if self._bar is not None:
            self._bar.set_description(desc)

    def show(self, **values: str) -> None:
        """Values shown after the count (`loss=0.4123`), replacing the ones shown before."""
        self._values = values
        if self._bar is not None:
            self._bar.set_postfix(values)

    def line(self) -> None:
        """Print one plain line with the count now (nothing on a terminal, where the bar is)."""
        if self._bar is not None or not self.enabled:
            return
        count = f"{self.done}/{self.total}" if self.total else str(self.done)
        share = f" ({100 * self.done // self.total}%)" if self.total else ""
        values = "".join(f", {key}={value}" for key, value in self._values.items())
        took = time.perf_counter() - self._began
        prefix = f"{self.desc}: " if self.desc else ""
        print(
            f"{prefix}{count} {_plural(self.unit)}{share}{values}, {took:.0f} s",
            file=self.stream,
            flush=True,
        )
        self._printed_at = self.done

    def close(self) -> None:
        """End the bar, or print the last plain line if the end was not printed yet."""
        if self._bar is not None:
            self._bar.close()
        elif self._every and self._printed_at != self.done:
            self.line()


def _plural(unit: str) -> str:
    """`steps`, `batches`."""
    return unit + ("es" if unit.endswith(("s", "x", "ch", "sh")) else "s")


def track(
    items: Iterable[Item],
    desc: str = "",
    unit: str = "it",
    *,
    enabled: bool = True,
    total: int | None = None,
) -> Iterator[Item]:
    """`items`, counted as the loop over them goes (see `Progress`)."""
    if total is None and isinstance(items, Sized):
        total = len(items)
    bar = Progress(total, desc, unit, enabled=enabled)
    try:
        for item in items:
            yield item
            bar.update()
    finally:
        bar.close()

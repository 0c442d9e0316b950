"""`--nproc N`: the command runs again, as it was typed less `--nproc`, on N processes of this
machine through PyTorch's launcher (`adaptlab.train.process_group`)."""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar

_TYPED: ContextVar[tuple[str, ...]] = ContextVar("adaptlab_command_line", default=())


def remember_command_line(arguments: Sequence[str]) -> None:
    """Keep the arguments `adaptlab` was called with (by `main`)."""
    _TYPED.set(tuple(arguments))


def relaunched(processes: int) -> bool:
    """With `processes` > 1, outside a launched group: run this command line (less `--nproc`)
    on that many processes, wait for them, and say True (the caller has nothing left to do)."""
    from adaptlab.train.process_group import in_launched_group, launch_processes

    if processes == 1 or in_launched_group():
        return False
    launch_processes(processes, _without_option(_TYPED.get(), "--nproc"))
    return True


def _without_option(arguments: Sequence[str], option: str) -> list[str]:
    """`arguments` less `option VALUE` and `option=VALUE`."""
    kept, skip = [], False
    for argument in arguments:
        if skip:
            skip = False
        elif argument == option:
            skip = True
        elif not argument.startswith(option + "="):
            kept.append(argument)
    return kept

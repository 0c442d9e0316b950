"""`--nproc N`: the command runs again, as it was typed less `--nproc`, on N processes of this
machine through PyTorch's launcher (`adaptlab.engine.process_group`).

Before any process starts, the launcher checks the count against the machine and makes every
check of the command line and the output, so that a mistake is one line; a process of the
launch ends with its launcher and leaves its errors for the launcher to tell once
(`adaptlab.engine.launched`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

from adaptlab.cli.option_group import Command
from adaptlab.errors import ConfigError

_TYPED: ContextVar[tuple[str, ...]] = ContextVar("adaptlab_command_line", default=())


def remember_command_line(arguments: Sequence[str]) -> None:
    """Keep the arguments `adaptlab` was called with (by `main`)."""
    _TYPED.set(tuple(arguments))


def relaunched(
    processes: int, device: str, *, oversubscribe: bool, check: Callable[[], None]
) -> bool:
    """With `processes` > 1, outside a launched group: fail unless this machine holds that many
    processes on `device`, make `check` (what the processes would check of the command line
    and the output), run this command line (less `--nproc`) on that many processes, wait for
    them, and say True (the caller has nothing left to do); else say False. `oversubscribe`
    without more than one process is refused (it lets --nproc start more processes than
    CPUs)."""
    from adaptlab.engine.process_group import (
        check_process_count,
        in_launched_group,
        launch_processes,
    )
    from adaptlab.models.device import torch_device

    if in_launched_group():
        return False
    if processes == 1:
        if oversubscribe:
            raise ConfigError("--oversubscribe is for --nproc N above 1; drop it or add --nproc")
        return False
    check_process_count(processes, torch_device(device), oversubscribe)
    check()
    launch_processes(processes, _without_option(_TYPED.get(), "--nproc"))
    return True


def errors_to_launcher(command: Command) -> Command:
    """`command`, which in a process of a launch leaves an error for the launcher to tell
    (`adaptlab.engine.launched.recorded_errors`) instead of printing it."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> None:
        from adaptlab.engine.launched import recorded_errors

        with recorded_errors():
            command(*args, **kwargs)

    return run


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

"""What `adaptlab train` and `adaptlab sequence` share, to the command line a run being a
sequence of one stage. Each command declares its own options, builds its spec and prints its
own result lines; this core gives both the scale options and --report-to, --nproc and
--oversubscribe (`training_command`), and runs the work the same way (`run_training`):
every check once before any process starts, the relaunch under --nproc, the trackers, the
work, and the result shown by the main process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Protocol, TypeVar

import typer

from adaptlab.cli.option_group import Command, with_option_group
from adaptlab.cli.options import positive
from adaptlab.cli.relaunch import errors_to_launcher, relaunched
from adaptlab.cli.scale_options import with_scale_options
from adaptlab.integrations.trackers.choice import folder_tracking, report_to, require_installed
from adaptlab.integrations.trackers.session import TrackedRun, track
from adaptlab.parallel.ranks import is_main_process


def _report_to(value: str) -> str:
    """Option callback: the trackers named, each one's package installed (else one line)."""
    require_installed(report_to(value))
    return value


ReportTo = Annotated[
    str,
    typer.Option(
        help="Experiment trackers to report to: none, tensorboard, mlflow, or both "
        "(tensorboard,mlflow); see docs/trackers.md.",
        callback=_report_to,
    ),
]
Processes = Annotated[
    int,
    typer.Option(
        "--nproc",
        help="Train on N processes of this machine (data parallel: gloo on the CPU, NCCL on "
        "GPUs, one GPU each); --batch-size stays the global batch.",
        callback=positive,
    ),
]
Oversubscribe = Annotated[
    bool,
    typer.Option(
        help="Let --nproc start more processes than the CPUs this command may run on "
        "(its affinity and cgroup quota; they share them: slower, and memory grows with each)."
    ),
]


@dataclass(frozen=True)
class Launch:
    """Where a command's work reports (`report_to`: none, or trackers) and on how many
    processes of this machine it runs; the defaults are the options' defaults."""

    report_to: str = "none"
    nproc: int = 1
    oversubscribe: bool = False


ONE_PROCESS = Launch()
"""Every launch option at its default: the `launch` parameter's default in a command."""

_LAUNCH_OPTIONS = {
    "report_to": (ReportTo, ONE_PROCESS.report_to),
    "nproc": (Processes, ONE_PROCESS.nproc),
    "oversubscribe": (Oversubscribe, ONE_PROCESS.oversubscribe),
}


def training_command(command: Command) -> Command:
    """`command` with the scale options in place of its `scale` parameter and --report-to,
    --nproc and --oversubscribe in place of its `launch` parameter; in a process of a launch,
    its errors are left for the launcher to tell."""
    with_launch = with_option_group("launch", Launch, _LAUNCH_OPTIONS)
    return errors_to_launcher(with_scale_options()(with_launch(command)))


class Spec(Protocol):
    """What the core reads of a command's spec (a RunSpec, a SequenceSpec)."""

    @property
    def device(self) -> str:
        """The device the work runs on, resolved."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON data (what the trackers keep as parameters)."""
        ...


Result = TypeVar("Result")


def run_training(
    spec: Spec,
    out: Path,
    launch: Launch,
    *,
    check: Callable[[], None],
    run: Callable[[], Result],
    record: Callable[[TrackedRun, Result], None],
    show: Callable[[Result], None],
) -> None:
    """Run a command's work, writing `out`: fail unless the trackers may report beside `out`;
    with --nproc N (outside a launch), make `check` (every check the processes would make of
    the command line and `out`) and run this command line on N processes; else `run` the work
    with the trackers open, `record` its result to them, and `show` it (the main process)."""
    tracking = folder_tracking(launch.report_to, out)
    if relaunched(launch.nproc, spec.device, oversubscribe=launch.oversubscribe, check=check):
        return
    with track(tracking, spec.to_dict()) as report:
        result = run()
        record(report, result)
    if is_main_process():
        show(result)

"""A process of a launch (`adaptlab train --nproc N`) and its launcher: the launcher names
itself and a folder for errors in the processes' environment; a process ends with the launcher
(even one killed with SIGKILL) and leaves an error in that folder (one JSON file per rank)
instead of printing it, exiting with code 1.

When the launch fails the launcher reads the errors: a user's mistake that any process found
(an `AdaptlabError`) is the one line the command ends with, never followed by the tracebacks of
the processes its end cut off; any other failure ends in the first failed process's traceback
and a line naming it. Nothing here loads torch: the command line reads it as it starts.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from adaptlab.errors import AdaptlabError
from adaptlab.fileio import atomic_write
from adaptlab.processes import end_with

LAUNCHER_VARIABLE = "ADAPTLAB_LAUNCHER_PID"
"""The pid of the command that started a launch's processes, set for them: they end with it."""
ERRORS_VARIABLE = "ADAPTLAB_LAUNCH_ERRORS"
"""The folder, set by the launcher for its processes, where each records what ended it."""


class LaunchedProcessError(AdaptlabError):
    """A user's mistake that a process of a launch found; its message is the process's own."""


@dataclass(frozen=True)
class ProcessError:
    """What ended process `rank`: a user's mistake (`user`: `message` says it all) or another
    error (`trace`: its traceback), at `time` (seconds since the epoch)."""

    rank: int
    user: bool
    message: str
    trace: str
    time: float


def follow_launcher() -> None:
    """In a process of a launch, end with the launcher (`adaptlab.processes.end_with`), so that
    a launcher killed, even with SIGKILL, leaves no process training and writing on its own;
    elsewhere nothing happens. Called as the command line starts, before anything loads."""
    launcher = os.environ.get(LAUNCHER_VARIABLE, "")
    if launcher.isdigit():
        end_with(int(launcher))


@contextmanager
def recorded_errors() -> Iterator[None]:
    """In a process of a launch, an error in the block ends the process with exit code 1,
    recorded for the launcher instead of printed; elsewhere nothing changes."""
    folder = os.environ.get(ERRORS_VARIABLE)
    if not folder:
        yield
        return
    try:
        yield
    except Exception as error:
        rank = int(os.environ.get("RANK", "0"))
        record = ProcessError(
            rank=rank,
            user=isinstance(error, AdaptlabError),
            message=str(error),
            trace="".join(traceback.format_exception(error)),
            time=time.time(),
        )
        atomic_write(Path(folder) / f"rank-{rank}.json", json.dumps(asdict(record)).encode())
        raise SystemExit(1) from None


def read_errors(folder: Path) -> list[ProcessError]:
    """The errors the launch's processes recorded in `folder`, first one first."""
    errors = [ProcessError(**json.loads(path.read_text())) for path in folder.glob("rank-*.json")]
    return sorted(errors, key=lambda error: error.time)


def user_mistake(errors: list[ProcessError]) -> LaunchedProcessError | None:
    """The first user's mistake among `errors`, as the error the launch ends with, or None."""
    found = next((error for error in errors if error.user), None)
    return LaunchedProcessError(found.message) if found is not None else None

"""The other work `contention.py` runs beside its step loops, each kind started in its own
process group and ended with it.

- a busy thread: one Python process spinning, at nice 0 or nice 10;
- a PyTorch program: a matmul loop at torch's defaults (as many spinning OpenMP threads as
  cores), at nice 0 or nice 10;
- the mix: at nice 10, an `adaptlab serve` answering a client that posts requests one after
  another, and short `adaptlab predict` commands starting one after another: every one at
  torch's defaults, as adaptlab ran before it chose its threads (torch imported before the
  command line starts, so it leaves them alone).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx

PYTHON = sys.executable
BUSY = "while True: pass"
TORCH_LOOP = (
    "import torch\na = torch.randn(512, 512)\nwhile True:\n    a = torch.tanh(a @ a / 512)\n"
)
OLD_ADAPTLAB = (
    "import sys, torch\n"  # torch first: the command line keeps torch's defaults
    "from adaptlab.cli.app import main\n"
    "main(sys.argv[1:])\n"
)
CLIENT = (
    "import sys, httpx\n"
    "texts = ['a gorgeous, witty film', 'a dull mess'] * 4\n"
    "while True:\n"
    "    try:\n"
    "        httpx.post(sys.argv[1], json={'adapter': 'rt', 'texts': texts}, timeout=300)\n"
    "    except httpx.HTTPError:\n"
    "        pass\n"
)
THREAD_VARIABLES = (
    "OMP_WAIT_POLICY",
    "OMP_NUM_THREADS",
    "ADAPTLAB_THREADS",
    "ADAPTLAB_THREADS_SOURCE",
)
Neighbours = list[subprocess.Popen[bytes]]


def torch_defaults() -> dict[str, str]:
    """This environment without any thread setting: a process started with it runs at torch's
    defaults (unless it chooses its own)."""
    return {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}


def start(command: Sequence[str], nice: int) -> subprocess.Popen[bytes]:
    """`command` at `nice`, in a session (and process group) of its own, its output discarded.

    Where the kernel groups each session's processes for scheduling (autogroup,
    /proc/sys/kernel/sched_autogroup_enabled), a process's nice counts only against its own
    session's processes: to every other session a `nice -n 10` process in its own session is
    as heavy as one at nice 0. So the session's group is given the same nice
    (/proc/self/autogroup), which is what a neighbour at nice 10 means to the scheduler."""
    at_nice = f'echo {nice} > /proc/self/autogroup 2>/dev/null; exec nice -n {nice} "$@"'
    return subprocess.Popen(
        ["sh", "-c", at_nice, "sh", *command],
        env=torch_defaults(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def busy_thread(nice: int) -> Neighbours:
    return [start([PYTHON, "-c", BUSY], nice)]


def torch_program(nice: int) -> Neighbours:
    return [start([PYTHON, "-c", TORCH_LOOP], nice)]


def adaptlab_mix(registry: Path, texts: Path, port: int) -> Neighbours:
    """The mix at nice 10: a server with its client, and predict commands in a loop; returns
    once the server answers (ending the server if it never does)."""
    serve = [
        PYTHON, "-c", OLD_ADAPTLAB, "serve", "--model", "minilm-l6",
        "--adapters", str(registry), "--port", str(port),
    ]  # fmt: skip
    predict = [PYTHON, "-c", OLD_ADAPTLAB, "predict", "--adapter", str(registry / "rt")]
    loop = f"while true; do {' '.join(map(_quoted, predict))} --input {_quoted(str(texts))}; done"
    started = [start(serve, 10)]
    try:
        _wait_for(f"http://127.0.0.1:{port}/health", started[0])
    except RuntimeError:
        end(started)
        raise
    started.append(start([PYTHON, "-c", CLIENT, f"http://127.0.0.1:{port}/predict"], 10))
    started.append(start(["sh", "-c", loop], 10))
    return started


def _quoted(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


def _wait_for(url: str, server: subprocess.Popen[bytes], seconds: float = 300) -> None:
    """Return once `url` answers 200; fail if the server ends or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the neighbour server ended with code {server.returncode}")
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RuntimeError(f"the neighbour server did not answer {url} in {seconds:g} s")


@contextmanager
def running(neighbours: Callable[[], Neighbours], settle: float = 5.0) -> Iterator[None]:
    """Within the block the processes `neighbours()` starts run (given `settle` seconds to get
    going); after it each one's process group is killed."""
    processes = neighbours()
    try:
        time.sleep(settle if processes else 0)
        yield
    finally:
        end(processes)


def end(processes: Neighbours) -> None:
    """Kill each process's group and reap it."""
    for process in processes:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

"""Processes' lives: whether a process that left its host and pid somewhere (a store row, a
staging folder) lives, and ending this process together with the one that started it."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import threading
import time

WATCH_SECONDS = 0.2
"""How often a process that ends with another looks whether that one still lives."""

_PR_SET_PDEATHSIG = 1
"""Linux's prctl option: the signal the kernel sends this process when its parent ends."""


def process_alive(host: str | None, pid: int | None) -> bool:
    """Whether process `pid` of `host` still exists; other hosts' processes are assumed alive
    (they cannot be asked), and so is one that exists but belongs to another user."""
    if host != socket.gethostname() or pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def end_with(starter: int) -> None:
    """End this process (SIGKILL) as soon as process `starter` of this machine, which started
    it, ends, so that nothing goes on working for a command that was killed. On Linux the kernel
    sends the signal when `starter` is the parent (PR_SET_PDEATHSIG); everywhere a daemon thread
    looks every WATCH_SECONDS, which also covers a `starter` that is no direct parent or that
    ended before the signal was asked for."""
    child = os.getppid() == starter
    if child and sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    def ended() -> bool:
        if child:  # a parent's end makes this process someone else's child
            return os.getppid() != starter
        return not process_alive(socket.gethostname(), starter)

    def watch() -> None:
        while not ended():
            time.sleep(WATCH_SECONDS)
        os.kill(os.getpid(), signal.SIGKILL)

    if ended():
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=watch, name="adaptlab-end-with-starter", daemon=True).start()

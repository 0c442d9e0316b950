"""One `study run` per results store: an exclusive lock file beside the store.

`study run` holds `<store>.lock` with `fcntl.flock` for as long as it runs; a second
`study run` on the same store refuses with one line naming the holder's pid and host. The
kernel drops the lock when its process dies (even by kill -9), so a crash never leaves a
stale lock. `status` and `report` read without it. The lock file itself is left in place.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from adaptlab.errors import ConfigError


def lock_path(store: Path) -> Path:
    """Where the lock of `store` lives: `<store>.lock`."""
    return store.with_name(store.name + ".lock")


class StoreLock:
    """Context manager holding the exclusive lock of one results store."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.path = lock_path(store)
        self._fd: int | None = None

    def __enter__(self) -> StoreLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            raise ConfigError(
                f"results store {self.store} is in use by another "
                f"`adaptlab study run` ({holder}); wait for it to finish or stop it first"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor releases the flock
            self._fd = None

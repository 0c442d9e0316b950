"""How far one rendering of a chat template may go, wherever templates render (training,
`predict`, `eval`, the server's render processes): the seconds it may take and the characters
it may write.

A template is code, from a user's file or an adapter's folder. `time_bound` stops a render
between two Python steps by raising `Overran`, a BaseException, so that no error handler of
the template's or Jinja's takes it. On the main thread, when no one else uses SIGALRM, an alarm
signal rings (`signal.setitimer`: a few microseconds a render); elsewhere (another thread,
where no signal can be caught, or beside someone else's alarm) a timer thread raises it in the
rendering thread. Neither reaches a render stuck inside one long C call.
"""

from __future__ import annotations

import ctypes
import signal
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from types import FrameType

RENDER_SECONDS = 2.0
"""The seconds one render may take: hundreds of times what a real template takes for a long
chat, short enough that a template that never ends is heard of at once."""
MIN_RENDERED_CHARS = 1_000_000
CHARS_PER_TOKEN = 8
_ALARMS = hasattr(signal, "setitimer")
"""Whether this platform has interval alarms (not Windows)."""


class Overran(BaseException):
    """A render ran past its time bound (a BaseException, so no template error handler takes
    it)."""


def rendered_chars(window: int) -> int:
    """The most characters a chat template may write for a model taking `window` tokens:
    1,000,000, or 8 per token of the window when that is more."""
    return max(MIN_RENDERED_CHARS, CHARS_PER_TOKEN * window)


def overran(seconds: float) -> str:
    """What a render stopped at `seconds` did, as its refusal says it."""
    return f"took more than {seconds:g} s to render the messages"


def overwrote(chars: int) -> str:
    """What a render that wrote `chars` characters, over its bound, did."""
    return f"rendered the messages as {chars:,} characters"


def time_bound(seconds: float) -> AbstractContextManager[None]:
    """A block that raises `Overran` once it has run `seconds` (see the module docstring); a
    caller catches it around the `with`, where it may also arise as the bound is lifted."""
    return _Alarm(seconds) if _alarm_ready() else _timer(seconds)


def _alarm_ready() -> bool:
    """Whether this thread can take an alarm signal no one else uses: the main thread, where
    no alarm is pending and SIGALRM's handler is `_ring` (set here where none was)."""
    if not _ALARMS or threading.current_thread() is not threading.main_thread():
        return False
    if signal.getitimer(signal.ITIMER_REAL)[0]:
        return False
    handler = signal.getsignal(signal.SIGALRM)
    if handler == signal.SIG_DFL:
        signal.signal(signal.SIGALRM, _ring)
        return True
    return handler is _ring


class _Alarm:
    """An alarm signal at `seconds`. `_ring` stays SIGALRM's handler after (one outside a
    bound does nothing), so an alarm that rings as the bound is lifted raises at most once,
    and only before the bound is lifted."""

    armed = False
    """Whether an alarm is set (the main thread's: one at a time)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        _Alarm.armed = True
        signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *raised: object) -> None:
        _Alarm.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)


def _ring(signum: int, frame: FrameType | None) -> None:
    if _Alarm.armed:
        _Alarm.armed = False
        raise Overran


@contextmanager
def _timer(seconds: float) -> Iterator[None]:
    """A timer thread that raises `Overran` in this thread at `seconds`."""
    ringer = _Ringer(threading.get_ident())
    timer = threading.Timer(seconds, ringer.ring)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        rang = ringer.stop()
    if rang:  # it rang as the block ended, and its exception was withdrawn
        raise Overran


class _Ringer:
    """Raises `Overran` in thread `ident` when `ring` comes before `stop`."""

    def __init__(self, ident: int) -> None:
        self._ident = ident
        self._lock = threading.Lock()
        self._stopped = False
        self._rang = False

    def ring(self) -> None:
        with self._lock:
            if not self._stopped:
                self._rang = True
                _raise_in(self._ident, Overran)

    def stop(self) -> bool:
        """Ring no more; whether it rang (an exception it raised, not yet seen, is
        withdrawn, so it cannot arise after the block)."""
        with self._lock:
            self._stopped = True
            if self._rang:
                _raise_in(self._ident, None)
            return self._rang


def _raise_in(ident: int, error: type[BaseException] | None) -> None:
    """Have thread `ident` raise `error` at its next Python step (None: withdraw one)."""
    exception = None if error is None else ctypes.py_object(error)
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), exception)

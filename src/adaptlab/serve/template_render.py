"""Chat templates rendered where they can be stopped: a few long-lived render processes
(`adaptlab.serve.template_process`), never the event loop or the model thread.

A template is code from an adapter's folder. In a render process a render is bounded in time
(`seconds`: stopped by an alarm there, and a process that still has not answered
`KILL_GRACE_SECONDS` later is killed and started again at its next use), in output
(`adaptlab.data.template_bounds.rendered_chars`) and in memory; a request waits on a thread of
this module while it renders, so other clients, `/health` and generation carry on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pickle
import queue
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from adaptlab.errors import AdaptlabError
from adaptlab.serve.errors import RequestError
from adaptlab.serve.template_process import RenderSetup, too_slow

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

PROCESSES = 2
"""Render processes per server: a template that runs to the bound holds one of them."""
KILL_GRACE_SECONDS = 5.0
"""How long past the bound a render process may take to answer before it is killed."""
START_SECONDS = 120.0
"""How long a render process may take to start (import transformers, read the tokenizer)."""
_BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from adaptlab.serve.template_process import main; main(int(sys.argv[2]), int(sys.argv[3]))"
)
"""A render process's program: the server's import path (so it imports the same adaptlab and
transformers), then `template_process.main` on the two pipes."""


class ChatTemplates:
    """Renders chats for `tokenizer` in `PROCESSES` render processes, each render within
    `seconds` and at most `max_chars` characters."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, seconds: float, max_chars: int) -> None:
        self.seconds = seconds
        self.max_chars = max_chars
        setup = pickle.dumps(RenderSetup(tokenizer, seconds, max_chars))
        self._processes = [_RenderProcess(setup) for _ in range(PROCESSES)]
        self._idle: queue.Queue[_RenderProcess] = queue.Queue()
        for process in self._processes:
            self._idle.put(process)
        self._threads = ThreadPoolExecutor(PROCESSES, thread_name_prefix="adaptlab-template")

    def start(self) -> None:
        """Start the render processes now, so the first chat does not wait for them."""
        for process in self._processes:
            process.start()

    @property
    def pids(self) -> list[int]:
        """The process ids of the render processes running."""
        return [pid for process in self._processes if (pid := process.pid) is not None]

    async def ids(
        self, messages: list[dict[str, str]], template: str | None, source: str
    ) -> list[int]:
        """The token ids of `messages` rendered by `template` (None: the tokenizer's own) with
        the assistant's turn opened; a 400 naming `source` if the template fails, overruns
        the bound or writes too much."""
        loop = asyncio.get_running_loop()
        request = json.dumps({"messages": messages, "template": template}).encode()
        answer = await loop.run_in_executor(self._threads, self._render, request)
        if "ids" not in answer:
            raise RequestError(400, f"{source} {answer['error']}")
        ids: list[int] = answer["ids"]
        return ids

    def close(self) -> None:
        """Stop the render processes; renders waiting for one are cancelled."""
        self._threads.shutdown(wait=False, cancel_futures=True)
        for process in self._processes:
            process.close()

    def _render(self, request: bytes) -> dict[str, Any]:
        process = self._idle.get()
        try:
            return process.render(request, self.seconds + KILL_GRACE_SECONDS, self.seconds)
        finally:
            self._idle.put(process)


class _RenderProcess:
    """One render process, started on first use and again after it was killed."""

    def __init__(self, setup: bytes) -> None:
        self._setup = setup
        self._lock = threading.Lock()
        self._closed = False
        self._process: subprocess.Popen[bytes] | None = None
        self._requests: Connection | None = None
        self._answers: Connection | None = None
        self._ready = False

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def start(self) -> None:
        """Start the process if it is not running (it reads the setup, then says it is ready)."""
        with self._lock:
            if self._closed:
                raise AdaptlabError("the server is stopping; it renders no more chats")
            if self._process is not None and self._process.poll() is None:
                return
            self._stop()
            requests_in, requests_out = os.pipe()
            answers_in, answers_out = os.pipe()
            self._process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, json.dumps(sys.path)]
                + [str(requests_in), str(answers_out)],
                pass_fds=(requests_in, answers_out),
                stdin=subprocess.DEVNULL,
                env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
            )
            os.close(requests_in)
            os.close(answers_out)
            self._requests = Connection(requests_out, readable=False)
            self._answers = Connection(answers_in, writable=False)
            self._ready = False
            with contextlib.suppress(OSError):  # it ended at once: its readiness says so
                self._requests.send_bytes(self._setup)

    def render(self, request: bytes, deadline: float, seconds: float) -> dict[str, Any]:
        """The process's answer to `request`, or a refusal's tail if it gave none within
        `deadline` seconds (it is then killed) or ended."""
        self.start()
        requests, answers = self._requests, self._answers
        assert requests is not None and answers is not None
        if not self._ready:
            self._wait_ready(answers)
        try:
            requests.send_bytes(request)
            if not answers.poll(deadline):
                self._kill()
                return {"error": too_slow(seconds)}
            answer: dict[str, Any] = json.loads(answers.recv_bytes())
            return answer
        except (EOFError, OSError):
            return {"error": f"ended the process rendering it (exit code {self._kill()})"}

    def _wait_ready(self, answers: Connection) -> None:
        """Wait for the process to say it is ready; a server error if it never does."""
        try:
            if answers.poll(START_SECONDS):
                answers.recv_bytes()
                self._ready = True
                return
        except (EOFError, OSError):
            pass
        code = self._kill()
        raise AdaptlabError(
            f"the chat template process did not start within {START_SECONDS:g} s (exit code "
            f"{code}); the server's log says why"
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._stop()

    def _kill(self) -> int | None:
        with self._lock:
            return self._stop()

    def _stop(self) -> int | None:
        """Kill the process and close its pipes; its exit code."""
        code = None
        if self._process is not None:
            self._process.kill()
            code = self._process.wait()
            self._process = None
        for connection in (self._requests, self._answers):
            if connection is not None:
                connection.close()
        self._requests = self._answers = None
        return code

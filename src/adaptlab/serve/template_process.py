"""The process that renders chat templates for the server (`adaptlab.serve.template_render`
starts it and runs `main` on a pipe of requests and a pipe of answers).

It reads its setup once (the tokenizer, the time bound, the most characters a render may
write), then renders one chat at a time, as training renders a chat with the assistant's turn
opened: `apply_chat_template(messages, chat_template=..., add_generation_prompt=True,
tokenize=False)`, then the text's token ids without added special tokens. Each answer is
JSON: `{"ids": [...]}`, or `{"error": "<the rest of a one-line refusal>"}` that the server
prefixes with the template's name.

A render that runs past the bound is stopped by an alarm between two Python steps
(`adaptlab.data.template_bounds`, as training's renders are; the server kills a process that
does not answer in time); on Linux the process's address space is capped at `MEMORY_BYTES`
more than it holds once ready, so a template cannot take the host's memory; and it exits as
soon as the server's end of the request pipe closes, whatever it is rendering.
"""

from __future__ import annotations

import json
import os
import pickle
import queue
import resource
import signal
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaptlab.data.template_bounds import Overran, overran, overwrote, time_bound
from adaptlab.errors import one_line

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

MEMORY_BYTES = 4 * 2**30
"""The most address space a render may add to what its process holds once ready (Linux)."""


@dataclass(frozen=True)
class RenderSetup:
    """What a render process needs: the served tokenizer, the seconds one render may take and
    the most characters it may write."""

    tokenizer: PreTrainedTokenizerBase
    seconds: float
    max_chars: int


def too_slow(seconds: float) -> str:
    """The refusal's tail for a render stopped at the bound."""
    return (
        f"{overran(seconds)}; a chat template must render within {seconds:g} s "
        "(--max-render-seconds)"
    )


def render(
    setup: RenderSetup, messages: list[dict[str, str]], template: str | None
) -> dict[str, Any]:
    """The token ids of `messages` rendered by `template` (None: the tokenizer's own), or the
    refusal's tail."""
    try:
        with time_bound(setup.seconds):
            text = setup.tokenizer.apply_chat_template(
                messages, chat_template=template, add_generation_prompt=True, tokenize=False
            )
        text = str(text)
        if len(text) > setup.max_chars:
            return {
                "error": f"{overwrote(len(text))}; a chat template may write at most "
                f"{setup.max_chars:,}"
            }
        text.encode("utf-8")  # a template may write an unpaired surrogate, which no tokenizer takes
    except Overran:
        return {"error": too_slow(setup.seconds)}
    except MemoryError:
        return {
            "error": f"ran out of memory rendering the messages (a render may take at most "
            f"{MEMORY_BYTES // 2**30} GiB)"
        }
    except Exception as error:  # a template is code: whatever it raises is its refusal
        return {"error": f"refused the messages: {one_line(error)}"}
    ids: list[int] = setup.tokenizer(text, add_special_tokens=False).input_ids
    if not ids:
        return {"error": "rendered the messages as no tokens"}
    return {"ids": ids}


def main(requests_fd: int, answers_fd: int) -> None:
    """Serve renders over the two pipes until the server closes its end."""
    requests = Connection(requests_fd, writable=False)
    answers = Connection(answers_fd, readable=False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the server, which stops this
    setup: RenderSetup = pickle.loads(requests.recv_bytes())
    _cap_memory()
    inbox: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=_read, args=(requests, inbox), daemon=True).start()
    answers.send_bytes(b'{"ready": true}')
    while True:
        request = json.loads(inbox.get())
        reply = render(setup, request["messages"], request["template"])
        try:
            answers.send_bytes(json.dumps(reply).encode())
        except OSError:  # the server is gone
            return


def _read(requests: Connection, inbox: queue.Queue[bytes]) -> None:
    """Pass requests to the renderer; end the process when the server's end closes."""
    while True:
        try:
            inbox.put(requests.recv_bytes())
        except (EOFError, OSError):
            os._exit(0)


def _cap_memory() -> None:
    """Cap the address space at `MEMORY_BYTES` more than the process holds now, where the OS
    says how much that is (Linux's /proc)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = pages * resource.getpagesize() + MEMORY_BYTES
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))

"""Untrusted chat templates cannot freeze `adaptlab serve`: a template renders in a render
process, stopped at `--max-render-seconds` (a process that does not answer is killed and
replaced), refused past its output cap, its memory capped; meanwhile `/health`, completions and
other chats answer, and SIGTERM stops a real server even while such a render runs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from serve_helpers import (  # noqa: E402
    free_port,
    running,
    save_lm_adapter,
    tiny_chat_llama,
    wait_for_health,
)

from adaptlab.errors import ConfigError  # noqa: E402
from adaptlab.serve import AdapterService, ServeOptions, create_app  # noqa: E402
from adaptlab.serve.template_render import KILL_GRACE_SECONDS  # noqa: E402

SPIN = (
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    "{{ messages[0]['content'] }}"
)
"""Two nested loops of 100,000: renders for hours."""
TEMPLATES = {
    "spin": SPIN,
    "huge": "{{ 'x' * 10000000 }}",
    "bulky": "{{ 'x ' * 50000 }}",
    "hog": "{{ 'x' * 10 ** 10 }}",
}
"""Adapters whose template misbehaves on any chat, by name."""
SECONDS = 2.0
"""The server's render bound (`--max-render-seconds`, its default)."""
ANSWERED = 5.0
"""The most seconds `/health` and well-behaved requests may take while a template spins."""
CHAT = [{"role": "user", "content": "one two three"}]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny chat Llama and a registry of `lm` (the tokenizer's template) and `TEMPLATES`."""
    root = tmp_path_factory.mktemp("template-bound")
    model_dir = tiny_chat_llama(root)
    registry = root / "registry"
    save_lm_adapter(model_dir, registry / "lm")
    for name, template in TEMPLATES.items():
        save_lm_adapter(model_dir, registry / name, template)
    return {"model": model_dir, "registry": registry}


@pytest.fixture(scope="module")
def service(setup: dict[str, Any]) -> Iterator[AdapterService]:
    options = ServeOptions(model=setup["model"], adapters=str(setup["registry"]), max_tokens=8)
    assert options.max_render_seconds == SECONDS
    service = AdapterService(options)
    yield service
    service.close()


@pytest.fixture(scope="module")
def url(service: AdapterService) -> Iterator[str]:
    with running(create_app(service)) as base_url:
        assert chat(base_url, "lm", timeout=120).status_code == 200  # the render processes are up
        yield base_url


def chat(url: str, model: str, timeout: float) -> Any:
    body = {"model": model, "messages": CHAT, "max_tokens": 2, "temperature": 0}
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=timeout)


def refusal(response: Any, status: int) -> str:
    """The one line of an OpenAI-shaped refusal with `status`."""
    assert response.status_code == status, response.text
    message = response.json()["error"]["message"]
    assert isinstance(message, str) and "\n" not in message and len(message) < 300, message
    return str(message)


def overran(name: str) -> str:
    return (
        f"the chat template of adapter {name!r} took more than 2 s to render the messages; a "
        "chat template must render within 2 s (--max-render-seconds)"
    )


def while_others_answer(url: str, request: Any, chats: bool = True) -> tuple[Any, float]:
    """`request()`'s answer and its seconds, run while `/health`, a completion and (with
    `chats`) a chat to a well-behaved adapter are asked again and again, each answered within
    `ANSWERED`."""
    done: dict[str, Any] = {}

    def ask() -> None:
        start = time.monotonic()
        done["response"] = request()
        done["seconds"] = time.monotonic() - start

    asker = threading.Thread(target=ask)
    asker.start()
    rounds = 0
    while asker.is_alive():
        assert httpx.get(f"{url}/health", timeout=ANSWERED).status_code == 200
        body = {"model": "lm", "prompt": "one two", "max_tokens": 2, "temperature": 0}
        completion = httpx.post(f"{url}/v1/completions", json=body, timeout=ANSWERED)
        assert completion.status_code == 200, completion.text
        if chats:
            assert chat(url, "lm", timeout=ANSWERED).status_code == 200
        rounds += 1
    asker.join()
    assert rounds >= 1
    return done["response"], done["seconds"]


def test_a_template_that_never_ends_is_stopped_at_the_bound(
    url: str, service: AdapterService
) -> None:
    processes = set(service.templates.pids)
    response, seconds = while_others_answer(url, lambda: chat(url, "spin", timeout=120))
    assert refusal(response, 400) == overran("spin")
    assert seconds < SECONDS + KILL_GRACE_SECONDS + 20  # the bound, and room for a busy machine
    assert set(service.templates.pids) == processes  # stopped by its alarm: nothing was killed


def test_a_render_process_that_does_not_answer_is_killed_and_replaced(
    url: str, service: AdapterService
) -> None:
    stopped = service.templates.pids
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)  # as a render stuck where no alarm reaches it
    try:
        request = lambda: chat(url, "lm", timeout=120)  # noqa: E731
        response, seconds = while_others_answer(url, request, chats=False)
    finally:
        for pid in set(stopped) & set(service.templates.pids):
            os.kill(pid, signal.SIGCONT)
    assert refusal(response, 400) == (
        "the chat template took more than 2 s to render the messages; a chat template must "
        "render within 2 s (--max-render-seconds)"
    )
    assert seconds >= SECONDS + KILL_GRACE_SECONDS
    assert len(set(stopped) - set(service.templates.pids)) == 1  # the one that rendered it
    for _ in range(2):
        assert chat(url, "lm", timeout=120).status_code == 200
    assert len(service.templates.pids) == 2  # the killed one started again


def test_a_template_writing_10_mb_is_refused(url: str) -> None:
    assert refusal(chat(url, "huge", timeout=120), 400) == (
        "the chat template of adapter 'huge' rendered the messages as 10,000,000 characters; "
        "a chat template may write at most 1,000,000"
    )


def test_output_under_the_cap_reaches_the_window_check(url: str) -> None:
    message = refusal(chat(url, "bulky", timeout=120), 400)
    assert message.startswith("the prompt has 50000 tokens; this model takes"), message


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the memory cap is Linux's")
def test_a_template_that_grabs_memory_is_refused(url: str) -> None:
    assert refusal(chat(url, "hog", timeout=120), 400) == (
        "the chat template of adapter 'hog' ran out of memory rendering the messages (a render "
        "may take at most 4 GiB)"
    )
    assert chat(url, "lm", timeout=120).status_code == 200


def test_the_bound_must_be_a_positive_number(setup: dict[str, Any]) -> None:
    for value in (0, -1.0, float("nan")):
        with pytest.raises(ConfigError, match="--max-render-seconds must be a finite number"):
            ServeOptions(
                model=setup["model"], adapters=str(setup["registry"]), max_render_seconds=value
            )


def children(pid: int) -> list[int]:
    """The processes `pid` started (Linux's /proc)."""
    found = Path(f"/proc/{pid}/task").glob("*/children")
    return [int(child) for path in found for child in path.read_text().split()]


def gone(pid: int) -> bool:
    """Whether process `pid` has ended (exited, or a zombie left to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
def test_sigterm_stops_the_server_while_a_render_runs(setup: dict[str, Any]) -> None:
    port = free_port()
    command = [sys.executable, "-c", "from adaptlab.cli.app import main; main()", "serve"]
    command += ["--model", setup["model"], "--adapters", str(setup["registry"])]
    command += ["--port", str(port), "--device", "cpu", "--max-render-seconds", "120"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(server, url)
        renderers = children(server.pid)
        assert len(renderers) == 2
        spinning = threading.Thread(target=_ask_quietly, args=(url,), daemon=True)
        spinning.start()
        time.sleep(3)  # the chat reaches a render process, which spins for up to 120 s
        assert spinning.is_alive()
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        deadline = time.monotonic() + 30
        while not all(gone(pid) for pid in renderers):
            assert time.monotonic() < deadline, "a render process outlived the server"
            time.sleep(0.1)
    finally:
        if server.poll() is None:
            server.kill()
        server.communicate(timeout=60)


def _ask_quietly(url: str) -> None:
    with contextlib.suppress(httpx.TransportError):  # the server stops under it
        chat(url, "spin", timeout=150)

"""`adaptlab serve --api-key`: every route but /health wants `Authorization: Bearer KEY`; a
request without it is a 401 (OpenAI's `invalid_api_key` under /v1) that changes nothing; the
`openai` client with the key works; a server open beyond loopback without a key, or with an
empty one, is refused in one line before anything loads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")

from cli_cases import refused  # noqa: E402
from serve_helpers import chat_registry, free_port, wait_for_health  # noqa: E402

from adaptlab.errors import ConfigError  # noqa: E402
from adaptlab.serve import AdapterService, ServeOptions, ray_serve  # noqa: E402
from adaptlab.serve.auth import is_loopback  # noqa: E402

KEY = "sk-local-7f3a9c2e51b84d06"
TEMPLATE = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
PROMPT = {"model": "lm", "prompt": "one two three", "max_tokens": 3, "temperature": 0}
BODIES: dict[str, Any] = {
    "/predict": {"adapter": "labels", "texts": ["a fine film"]},
    "/admin/reload": None,
    "/v1/completions": PROMPT,
    "/v1/chat/completions": {
        "model": "lm",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 3,
    },
}
GUARDED = [
    ("GET", "/adapters"),
    ("GET", "/metrics"),
    ("GET", "/docs"),
    ("GET", "/openapi.json"),
    ("GET", "/v1/models"),
    *(("POST", path) for path in BODIES),
]


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny Llama with a chat template, a causal-LM adapter `lm` and a classifier `labels`."""
    return chat_registry(tmp_path_factory.mktemp("api-key"), TEMPLATE)


@pytest.fixture(scope="module")
def service(setup: dict[str, Any]) -> Iterator[AdapterService]:
    options = ServeOptions(model=setup["model"], adapters=str(setup["registry"]), api_key=KEY)
    service = AdapterService(options)
    yield service
    service.close()


def call(url: str, method: str, path: str, headers: dict[str, str]) -> Any:
    body = BODIES.get(path)
    content = json.dumps(body).encode() if body is not None else None
    headers = {"content-type": "application/json", **headers}
    return httpx.request(method, f"{url}{path}", content=content, headers=headers, timeout=120)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        bearer("wrong"),
        bearer(KEY + "x"),
        bearer(KEY[:-1]),
        {"Authorization": "Bearer"},
        {"Authorization": KEY},
        {"Authorization": f"Basic {KEY}"},
        {"X-Api-Key": KEY},
    ],
    ids=["none", "wrong", "longer", "shorter", "empty", "no-scheme", "basic", "other-header"],
)
def test_without_the_key_every_route_but_health_is_401_and_changes_nothing(
    url: str, service: AdapterService, headers: dict[str, str]
) -> None:
    loaded, entries = service.pool.names, dict(service.registry.entries)
    for method, path in GUARDED:
        response = call(url, method, path, headers)
        assert response.status_code == 401, (path, response.text)
        assert response.headers["www-authenticate"] == "Bearer"
        error = response.json()["error"]
        if path.startswith("/v1/"):
            assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"
            error = error["message"]
        assert isinstance(error, str) and "\n" not in error and KEY not in error
        wanted = "wants a key" if "Authorization" not in headers else "not this server's key"
        assert wanted in error
    assert service.pool.names == loaded and service.registry.entries == entries
    assert not service.generator.busy()
    health = httpx.get(f"{url}/health", timeout=60)
    assert health.status_code == 200 and health.json()["status"] == "ok"


def test_with_the_key_every_route_answers(url: str) -> None:
    for method, path in GUARDED:
        response = call(url, method, path, bearer(KEY))
        assert response.status_code == 200, (path, response.text)
    lower = call(url, "POST", "/predict", {"authorization": f"bearer {KEY}"})
    assert lower.status_code == 200  # header names and the scheme are case-insensitive


def test_a_reload_without_the_key_does_not_happen(
    url: str, service: AdapterService, setup: dict[str, Any]
) -> None:
    added = setup["registry"] / "labels-2"
    shutil.copytree(setup["registry"] / "labels", added)
    try:
        for headers in ({}, bearer("wrong")):
            response = httpx.post(f"{url}/admin/reload", headers=headers, timeout=60)
            assert response.status_code == 401
            assert "labels-2" not in service.registry.entries
        response = httpx.post(f"{url}/admin/reload", headers=bearer(KEY), timeout=60)
        assert response.status_code == 200 and "labels-2" in response.json()["adapters"]
    finally:
        shutil.rmtree(added)
        httpx.post(f"{url}/admin/reload", headers=bearer(KEY), timeout=60)
    assert "labels-2" not in service.registry.entries


def test_two_authorization_headers_are_refused_in_either_order(url: str) -> None:
    good, bad = ("Authorization", f"Bearer {KEY}"), ("Authorization", "Bearer wrong")
    for headers in ([good, bad], [bad, good], [good, good]):
        response = httpx.get(f"{url}/adapters", headers=headers, timeout=60)
        assert response.status_code == 401, headers


def test_a_request_without_the_key_is_refused_before_its_body_is_read(url: str) -> None:
    huge = b'{"x": "' + b"a" * 10_000_000 + b'"}'
    response = httpx.post(f"{url}/v1/completions", content=huge, timeout=120)
    assert response.status_code == 401  # not 413: nothing of it was looked at


def test_the_openai_client_works_with_the_key_and_is_refused_without_it(url: str) -> None:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=120)
    assert "lm" in [m.id for m in client.models.list()]
    answer = client.completions.create(model="lm", prompt="one two", max_tokens=3, temperature=0)
    assert answer.model == "lm" and answer.choices[0].finish_reason in ("stop", "length")
    chat = client.chat.completions.create(
        model="lm", messages=[{"role": "user", "content": "hi"}], max_tokens=3
    )
    assert chat.choices[0].message.role == "assistant"
    chunks = list(client.completions.create(model="lm", prompt="one", max_tokens=3, stream=True))
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    stranger = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as denied:
        stranger.completions.create(model="lm", prompt="one", max_tokens=3)
    assert denied.value.code == "invalid_api_key"
    assert "not this server's key" in str(denied.value)


def test_the_key_is_compared_in_constant_time(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import hmac

    from adaptlab.serve import auth

    compared: list[tuple[bytes, bytes]] = []
    compare = hmac.compare_digest

    def spy(given: bytes, key: bytes) -> bool:
        compared.append((given, key))
        return compare(given, key)

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    assert httpx.get(f"{url}/adapters", headers=bearer("guess"), timeout=60).status_code == 401
    assert httpx.get(f"{url}/adapters", headers=bearer(KEY), timeout=60).status_code == 200
    assert compared == [(b"guess", KEY.encode()), (KEY.encode(), KEY.encode())]


def test_keys_a_header_cannot_carry_are_refused_and_the_key_stays_out_of_reprs(
    setup: dict[str, Any],
) -> None:
    for key, message in [
        ("", "--api-key is empty"),
        ("two words", "visible ASCII characters without spaces"),
        ("clé", "visible ASCII characters without spaces"),
        ("tab\tkey", "visible ASCII characters without spaces"),
    ]:
        with pytest.raises(ConfigError, match=message):
            ServeOptions(model=setup["model"], adapters=str(setup["registry"]), api_key=key)
    options = ServeOptions(model=setup["model"], adapters=str(setup["registry"]), api_key=KEY)
    assert KEY not in repr(options)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("10.0.0.7", False),
        ("my-laptop.lan", False),
        ("localhost.example.com", False),
    ],
)
def test_only_loopback_hosts_count_as_this_machine_alone(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "my-laptop.lan"])
def test_a_host_beyond_loopback_without_a_key_is_refused_in_one_line(
    host: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ADAPTLAB_API_KEY", raising=False)
    nowhere = str(tmp_path / "nowhere")  # were anything loaded, these would fail first
    args = ["serve", "--model", nowhere, "--adapters", nowhere, "--host", host]
    refused(args, capsys, f"--host {host} opens the server to the network without a key")
    refused([*args, "--ray"], capsys, "without a key: give --api-key KEY")
    with pytest.raises(ConfigError, match="without a key"):  # the Python API too
        options = ServeOptions(model=nowhere, adapters=nowhere)
        ray_serve.run(options, host=host, blocking=False)


def test_key_options_that_contradict_or_are_empty_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    nowhere = str(tmp_path / "nowhere")
    args = ["serve", "--model", nowhere, "--adapters", nowhere]
    monkeypatch.delenv("ADAPTLAB_API_KEY", raising=False)
    refused([*args, "--api-key", ""], capsys, "--api-key is empty")
    refused([*args, "--api-key", "a key"], capsys, "--api-key must be visible ASCII")
    refused([*args, "--api-key", KEY, "--insecure-no-key"], capsys, "contradict each other")
    monkeypatch.setenv("ADAPTLAB_API_KEY", "")
    refused(args, capsys, "ADAPTLAB_API_KEY is empty")
    monkeypatch.setenv("ADAPTLAB_API_KEY", KEY)
    refused([*args, "--insecure-no-key", "--host", "0.0.0.0"], capsys, "contradict each other")
    # with a key, or told so, a host beyond loopback passes; then the missing model stops it
    refused([*args, "--host", "0.0.0.0"], capsys, "nowhere")
    monkeypatch.delenv("ADAPTLAB_API_KEY")
    refused([*args, "--host", "0.0.0.0", "--insecure-no-key"], capsys, "nowhere")


def test_the_refusal_comes_before_any_model_or_server_code_loads() -> None:
    loaded = ("transformers", "fastapi", "uvicorn", "adaptlab.serve.service")
    code = (
        "import sys\nfrom adaptlab.cli.app import main\n"
        "try:\n    main(['serve', '--model', 'm', '--adapters', 'a', '--host', '0.0.0.0'])\n"
        "except SystemExit as done:\n"
        f"    print(done.code, [m for m in {loaded!r} if m in sys.modules])\n"
    )
    environment = {k: v for k, v in os.environ.items() if k != "ADAPTLAB_API_KEY"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=environment
    )
    assert done.stdout.strip() == "1 []", done.stdout + done.stderr
    assert done.stderr.count("error: ") == 1 and "without a key" in done.stderr


def test_the_command_line_takes_its_key_from_the_environment(setup: dict[str, Any]) -> None:
    """`adaptlab serve` with ADAPTLAB_API_KEY set: a live server on a loopback port, refusing
    requests without the key and answering the `openai` client that has it."""
    port = free_port()
    command = [sys.executable, "-c", "from adaptlab.cli.app import main; main()", "serve"]
    command += ["--model", setup["model"], "--adapters", str(setup["registry"])]
    server = subprocess.Popen(
        [*command, "--port", str(port), "--device", "cpu"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "ADAPTLAB_API_KEY": KEY},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_for_health(server, url) == 200
        assert httpx.post(f"{url}/v1/completions", json=PROMPT, timeout=60).status_code == 401
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=120)
        answer = client.completions.create(**PROMPT)
        assert answer.choices[0].finish_reason in ("stop", "length")
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=60)
    assert "every route but /health wants the key" in output and KEY not in output

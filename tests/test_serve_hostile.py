"""`adaptlab serve` takes hostile requests calmly: every bad value, text or body is a 4xx with a
one-line reason (OpenAI's error shape under /v1), never a 500 or a stuck model thread;
temperatures and top_p near 0 pick the greedy tokens; stop strings are bounded and matched
a character at a time."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import torch

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from serve_helpers import chat_registry  # noqa: E402

from adaptlab.engine.sampling import Sampling, StopText, pick  # noqa: E402
from adaptlab.serve import AdapterService, ServeOptions  # noqa: E402
from adaptlab.serve.openai_schema import MAX_STOP_CHARS  # noqa: E402

SURROGATE = '"\\ud800"'
"""A lone UTF-16 surrogate as JSON writes it: json.loads takes it, no tokenizer can."""
PROMPT = {"model": "lm", "prompt": "one two three", "max_tokens": 6}
CHAT = {"model": "lm", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny Llama with a chat template, a causal-LM adapter `lm` and a classifier `labels`."""
    return chat_registry(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def service(setup: dict[str, Any]) -> Any:
    options = ServeOptions(model=setup["model"], adapters=str(setup["registry"]), max_tokens=32)
    service = AdapterService(options)
    yield service
    service.close()


def send(url: str, path: str, body: Any = None, raw: bytes | None = None, **kwargs: Any) -> Any:
    """POST `body` as JSON (or the bytes `raw`) to `path`."""
    headers = {"content-type": "application/json", **kwargs.pop("headers", {})}
    content = raw if raw is not None else json.dumps(body).encode()
    return httpx.post(f"{url}{path}", content=content, headers=headers, timeout=120, **kwargs)


def with_literal(body: dict[str, Any], key: str, literal: str) -> bytes:
    """`body` as JSON text with `key` set to the JSON text `literal` (an escape, NaN, ...)."""
    return json.dumps({**body, key: "__here__"}).replace('"__here__"', literal).encode()


def refusal(response: Any) -> str:
    """The one line of a refusal, from either shape: OpenAI's under /v1, plain elsewhere."""
    error = response.json()["error"]
    message = error["message"] if isinstance(error, dict) else error
    assert isinstance(message, str) and "\n" not in message and len(message) < 300, message
    if isinstance(error, dict):
        assert error["type"] == "invalid_request_error" and error["code"] == response.status_code
    return message


def assert_idle(service: AdapterService) -> None:
    """The model thread has nothing left to do (a refused request queued nothing)."""
    deadline = time.monotonic() + 30  # the step that sent the last answer may still be ending
    while service.generator.busy():
        assert time.monotonic() < deadline, "the model thread is still busy"
        time.sleep(0.01)


# -- lone surrogates -------------------------------------------------------------------------


def test_predict_refuses_a_lone_surrogate_in_one_line(url: str, service: AdapterService) -> None:
    raw = b'{"adapter": "labels", "texts": ["fine", ' + SURROGATE.encode() + b"]}"
    response = send(url, "/predict", raw=raw)
    assert response.status_code == 400, response.text
    assert refusal(response) == (
        "texts[1] holds an unpaired surrogate ('\\ud800' at character 0): send valid Unicode text"
    )
    fine = send(url, "/predict", {"adapter": "labels", "texts": ["fine"]})
    assert fine.status_code == 200, fine.text


@pytest.mark.parametrize(
    ("path", "raw", "where"),
    [
        ("/v1/completions", with_literal(PROMPT, "prompt", SURROGATE), "prompt"),
        (
            "/v1/completions",
            with_literal({**PROMPT, "stream": True}, "prompt", SURROGATE),
            "prompt",
        ),
        ("/v1/completions", with_literal(PROMPT, "stop", SURROGATE), "stop"),
        ("/v1/completions", with_literal(PROMPT, "stop", f'["x", {SURROGATE}]'), "stop[1]"),
        (
            "/v1/chat/completions",
            with_literal(CHAT, "messages", f'[{{"role": "user", "content": "a{SURROGATE[1:]}}}]'),
            "messages[0].content",
        ),
        (
            "/v1/chat/completions",
            with_literal(
                CHAT,
                "messages",
                f'[{{"role": "user", "content": [{{"type": "text", "text": {SURROGATE}}}]}}]',
            ),
            "messages[0].content",
        ),
    ],
)
def test_v1_refuses_a_lone_surrogate_in_openai_s_shape(
    url: str, path: str, raw: bytes, where: str
) -> None:
    response = send(url, path, raw=raw)
    assert response.status_code == 400, response.text
    assert refusal(response).startswith(f"{where} holds an unpaired surrogate")


# -- sampling near 0 -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"temperature": 1e-300},
        {"temperature": 1e-45},
        {"temperature": 5e-324},
        {"temperature": 1.0, "top_p": 1e-300},
        {"temperature": 1e-300, "top_p": 1e-300},
    ],
)
def test_temperature_and_top_p_near_zero_pick_the_greedy_tokens(
    url: str, options: dict[str, float]
) -> None:
    greedy = send(url, "/v1/completions", {**PROMPT, "temperature": 0})
    assert greedy.status_code == 200, greedy.text
    for seed in (0, 1):
        response = send(url, "/v1/completions", {**PROMPT, **options, "seed": seed})
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["text"] == greedy.json()["choices"][0]["text"]
    chat = send(url, "/v1/chat/completions", {**CHAT, **options})
    assert chat.status_code == 200, chat.text


def test_pick_with_a_vanishing_temperature_or_top_p_takes_the_top_token() -> None:
    logits = torch.tensor([[0.5, 3.0, -2.0, 2.999], [9.0, 1.0, 8.0, -1e4]])
    for temperature, top_p in [(1e-300, 1.0), (1e-45, 1.0), (5e-324, 1.0), (1.0, 1e-300)]:
        options = [Sampling(4, temperature, top_p)] * 2
        generators = [torch.Generator().manual_seed(s) for s in range(2)]
        assert pick(logits, options, generators) == [1, 0]
    tied = torch.tensor([[1.0, 7.0, 7.0, 0.0]])
    drawn = {
        pick(tied, [Sampling(4, 1e-300)], [torch.Generator().manual_seed(s)])[0] for s in range(40)
    }
    assert drawn == {1, 2}  # tokens tied for the top share the draw, as the limit says


# -- stop strings ----------------------------------------------------------------------------


def feed(stop: list[str], texts: list[str]) -> tuple[StopText, list[str]]:
    """A StopText given the completion's whole text after each token; the pieces it let out."""
    text = StopText(stop)
    pieces = []
    for whole in texts:
        text.update(whole)
        pieces.append(text.fresh(final=text.stopped))
        if text.stopped:
            break
    return text, pieces


def test_a_stop_string_split_across_tokens_is_found_where_it_starts() -> None:
    text, pieces = feed(["cat sat"], ["the ca", "the cat s", "the cat sat", "the cat sat on"])
    assert text.stopped and text.text == "the "
    assert pieces == ["the ", "", ""]  # "ca", "cat s" were held back, never sent
    text, pieces = feed(["aab"], ["a", "aa", "aaa", "aaab", "aaabz"])  # the match restarts
    assert text.stopped and text.text == "a" and "".join(pieces) == "a"


def test_a_stop_string_is_not_found_before_it_is_complete() -> None:
    text, pieces = feed(["cat!"], ["the ca", "the cat", "the cat?", "the cat? end"])
    assert not text.stopped and text.text == "the cat? end"
    assert pieces == ["the ", "", "cat?", " end"]
    assert "".join(pieces) == text.text


def test_the_first_stop_string_completed_cuts_the_text() -> None:
    text, _ = feed(["b", "abc"], ["abc"])
    assert text.text == "a"  # "b" is complete first
    text, _ = feed(["bc", "abc"], ["xabcd"])
    assert text.text == "x"  # both end at "c": the one that starts first cuts
    text, _ = feed(["end"], ["caf\ufffd", "café en", "café end"])
    assert text.text == "café "  # an incomplete character waits, then is read once whole


def test_text_that_decodes_differently_behind_its_end_is_read_again() -> None:
    text, pieces = feed(["ab"], ["xa", "x a", "x ab"])
    assert text.stopped and text.text == "x "


def test_long_stop_strings_at_the_limit_are_matched_exactly() -> None:
    stop = "x" * (MAX_STOP_CHARS - 1) + "y"
    steps = ["x" * n for n in range(0, 3 * MAX_STOP_CHARS, 7)]
    text, pieces = feed([stop], [*steps, steps[-1] + "y tail"])
    assert text.stopped and text.text == "x" * (len(steps[-1]) - MAX_STOP_CHARS + 1)
    assert "".join(pieces) == text.text
    text, _ = feed([stop], steps)
    assert not text.stopped and text.fresh(final=False) == ""  # all of it could still be stop's
    assert len(text.text) - text.sent == MAX_STOP_CHARS - 1


@pytest.mark.parametrize(
    ("stop", "message"),
    [
        (["a", "b", "c", "d", "e"], "stop has 5 strings; at most 4"),
        (["a"] * 1000, "stop has 1000 strings; at most 4"),
        ("x" * 1_200_000, "stop has 1200000 characters; a stop string has at most 1000"),
        (["x", "y" * 1001], "stop[1] has 1001 characters; a stop string has at most 1000"),
        ("", "stop is empty: a stop string needs a character"),
        (["a", ""], "stop[1] is empty: a stop string needs a character"),
    ],
)
def test_stop_strings_past_the_limits_are_refused(
    url: str, service: AdapterService, stop: Any, message: str
) -> None:
    response = send(url, "/v1/completions", {**PROMPT, "stop": stop})
    assert response.status_code == 400, response.text
    assert refusal(response) == message
    assert_idle(service)


def test_stop_strings_at_the_limits_are_taken(url: str) -> None:
    stops = ["x" * MAX_STOP_CHARS, "ab" * (MAX_STOP_CHARS // 2), "zzz", "\n\n"]
    response = send(url, "/v1/completions", {**PROMPT, "stop": stops, "temperature": 0})
    assert response.status_code == 200, response.text


# -- every other hostile value ---------------------------------------------------------------


HOSTILE = [
    # max_tokens and n
    ("/v1/completions", {**PROMPT, "max_tokens": 0}, 422, "max_tokens: Input should be greater"),
    ("/v1/completions", {**PROMPT, "max_tokens": -5}, 422, "max_tokens: Input should be greater"),
    ("/v1/completions", {**PROMPT, "max_tokens": 10**12}, 400, "limit of 32"),
    ("/v1/completions", {**PROMPT, "max_tokens": 2.5}, 422, "max_tokens: Input should be a valid"),
    ("/v1/completions", {**PROMPT, "max_tokens": "3"}, 422, "max_tokens: Input should be a valid"),
    ("/v1/completions", {**PROMPT, "max_tokens": True}, 422, "max_tokens: Input should be a valid"),
    ("/v1/chat/completions", {**CHAT, "max_completion_tokens": 10**12}, 400, "limit of 32"),
    ("/v1/completions", {**PROMPT, "n": 10**9}, 422, "n: Input should be less than"),
    ("/v1/completions", {**PROMPT, "n": 0}, 422, "n: Input should be greater than"),
    # temperature, top_p, seed, logprobs
    ("/v1/completions", {**PROMPT, "temperature": -1}, 422, "temperature: Input should be greater"),
    (
        "/v1/completions",
        {**PROMPT, "temperature": "NaN"},
        422,
        "temperature: Input should be a val",
    ),
    (
        "/v1/completions",
        {**PROMPT, "temperature": "1.0"},
        422,
        "temperature: Input should be a val",
    ),
    ("/v1/completions", {**PROMPT, "temperature": 1e308}, 422, "temperature: Input should be less"),
    ("/v1/completions", {**PROMPT, "top_p": 0}, 422, "top_p: Input should be greater than 0"),
    ("/v1/completions", {**PROMPT, "top_p": 1.5}, 422, "top_p: Input should be less than"),
    ("/v1/completions", {**PROMPT, "top_p": "0.5"}, 422, "top_p: Input should be a valid number"),
    ("/v1/completions", {**PROMPT, "seed": 2**64}, 422, "seed: Input should be less than"),
    ("/v1/completions", {**PROMPT, "seed": -(2**63) - 1}, 422, "seed: Input should be greater"),
    ("/v1/completions", {**PROMPT, "seed": 1.5}, 422, "seed: Input should be a valid integer"),
    ("/v1/completions", {**PROMPT, "logprobs": 5}, 422, "logprobs: Extra inputs"),
    ("/v1/completions", {**PROMPT, "logprobs": True}, 422, "logprobs: Extra inputs"),
    # stop of the wrong type
    ("/v1/completions", {**PROMPT, "stop": [1, 2]}, 422, "stop.str: Input should be a valid"),
    ("/v1/completions", {**PROMPT, "stop": {"a": 1}}, 422, "stop.str: Input should be a valid"),
    # messages
    ("/v1/chat/completions", {**CHAT, "messages": []}, 422, "messages: List should have at least"),
    ("/v1/chat/completions", {**CHAT, "messages": "hi"}, 422, "messages: Input should be a valid"),
    (
        "/v1/chat/completions",
        {**CHAT, "messages": [{"role": "wizard", "content": "x"}]},
        422,
        "messages[0].role: Input should be",
    ),
    (
        "/v1/chat/completions",
        {**CHAT, "messages": [{"role": "user", "content": [{"type": "image_url", "url": "x"}]}]},
        422,
        "messages[0].content",
    ),
    (
        "/v1/chat/completions",
        {**CHAT, "messages": [{"role": "user", "content": None}]},
        422,
        "messages[0].content",
    ),
    (
        "/v1/chat/completions",
        {**CHAT, "messages": [{"role": "user", "content": "a"}] * 100_000},
        413,
        "request body of",
    ),
    # model names that are not served models
    ("/v1/completions", {**PROMPT, "model": "nope"}, 404, "no adapter 'nope' in the registry"),
    ("/v1/completions", {**PROMPT, "model": "../../etc"}, 400, "never a path"),
    ("/v1/completions", {**PROMPT, "model": "/etc/passwd"}, 400, "never a path"),
    ("/v1/completions", {**PROMPT, "model": "a" * 100_000}, 400, "'aaaaaa"),
    ("/v1/completions", {**PROMPT, "model": "labels"}, 400, "(it labels text): ask /predict"),
    ("/v1/completions", {**PROMPT, "model": 3}, 422, "model: Input should be a valid string"),
    # streams
    ("/v1/completions", {**PROMPT, "stream": "yes"}, 422, "stream: Input should be a valid bool"),
    ("/v1/completions", {**PROMPT, "stream": True, "max_tokens": -1}, 422, "max_tokens: Input"),
    ("/v1/completions", {**PROMPT, "stream": True, "stream_options": {"x": 1}}, 422, "extra"),
    # prompts past the window or the limits
    ("/v1/completions", {**PROMPT, "prompt": "a b " * 2400}, 400, "this model takes 2048"),
    ("/v1/completions", {**PROMPT, "prompt": "a" * 10_001}, 413, "the limit is 10000"),
    (
        "/v1/chat/completions",
        {**CHAT, "messages": [{"role": "user", "content": "a b " * 2400}]},
        400,
        "this model takes 2048",
    ),
    ("/v1/completions", {**PROMPT, "prompt": [1, 2]}, 422, "prompt: Input should be a valid"),
    # /predict
    ("/predict", {"adapter": "labels", "texts": ["a"] * 100_000}, 413, "the limit is 64"),
    ("/predict", {"adapter": "a" * 100_000, "texts": ["a"]}, 400, "not an adapter name"),
    ("/predict", {"adapter": "labels", "texts": {"a": 1}}, 422, "texts: Input should be a valid"),
    ("/predict", {"adapter": "lm", "texts": ["a"]}, 400, "it generates text"),
]


@pytest.mark.parametrize(("path", "body", "status", "fragment"), HOSTILE)
def test_hostile_values_are_refused_in_one_line(
    url: str, service: AdapterService, path: str, body: Any, status: int, fragment: str
) -> None:
    response = send(url, path, body)
    assert response.status_code == status, response.text
    assert fragment.lower() in refusal(response).lower()
    assert_idle(service)


NUMBERS = [
    ("temperature", "NaN", 422, "temperature: Input should be a finite number"),
    ("temperature", "Infinity", 422, "temperature: Input should be a finite number"),
    ("top_p", "NaN", 422, "top_p: Input should be a finite number"),
    ("max_tokens", "9" * 4000, 400, "max_tokens 99999"),
    ("max_tokens", "9" * 5000, 400, "the body is not JSON this server can read"),
    ("seed", "9" * 4000, 422, "seed: Input should be less than"),
]


@pytest.mark.parametrize(("key", "literal", "status", "fragment"), NUMBERS)
def test_numbers_json_cannot_hold_or_python_cannot_show_are_refused(
    url: str, key: str, literal: str, status: int, fragment: str
) -> None:
    response = send(url, "/v1/completions", raw=with_literal(PROMPT, key, literal))
    assert response.status_code == status, response.text
    assert refusal(response).startswith(fragment)


BODIES = [
    (b"{not json", {}, 422, "the body is not valid JSON: Expecting property name"),
    (b"[1, 2]", {}, 422, "body: Input should be a valid dictionary"),
    (b"null", {}, 422, "body: Input should be a valid dictionary"),
    (b'{"x": "\xff\xfe"}', {}, 400, "the body is not JSON this server can read"),
    (b'{"x": ' + b"[" * 5000 + b"]" * 5000 + b"}", {}, 400, "the body is not JSON this server can"),
    (b'{"x": "' + b"a" * 10_000_000 + b'"}', {}, 413, "request body of 10000009 bytes is over"),
    (b"{}", {"content-type": "text/plain"}, 422, "send the body as JSON, with 'Content-Type"),
]


@pytest.mark.parametrize("path", ["/predict", "/v1/completions", "/v1/chat/completions"])
@pytest.mark.parametrize(("raw", "headers", "status", "fragment"), BODIES)
def test_bodies_that_are_not_a_json_object_are_refused(
    url: str, path: str, raw: bytes, headers: dict[str, str], status: int, fragment: str
) -> None:
    response = send(url, path, raw=raw, headers=headers)
    assert response.status_code == status, response.text
    assert refusal(response).startswith(fragment)


@pytest.mark.parametrize("path", ["/predict", "/v1/completions"])
def test_a_body_sent_in_chunks_is_cut_off_at_the_limit(url: str, path: str) -> None:
    """Without a Content-Length the body is counted as it comes, and refused past the limit."""

    def chunks() -> Any:
        for _ in range(160):  # 10 MB in all, were it all read
            yield b" " * 65_536

    response = httpx.post(f"{url}{path}", content=chunks(), timeout=120)
    assert response.status_code == 413, response.text
    assert refusal(response).startswith("request body is over")


def test_unknown_routes_and_methods_answer_in_the_same_shape(url: str) -> None:
    missing = send(url, "/v1/nope", {})
    assert missing.status_code == 404 and refusal(missing) == "Not Found"
    assert missing.json()["error"]["code"] == 404
    wrong = httpx.get(f"{url}/predict", timeout=60)
    assert wrong.status_code == 405 and refusal(wrong) == "Method Not Allowed"


def test_after_every_refusal_the_model_thread_still_answers(
    url: str, service: AdapterService
) -> None:
    response = send(url, "/v1/completions", {**PROMPT, "temperature": 0, "stream": True})
    assert response.status_code == 200 and response.text.endswith("data: [DONE]\n\n")
    assert send(url, "/predict", {"adapter": "labels", "texts": ["a"]}).status_code == 200
    assert_idle(service)

"""Text generation in `adaptlab serve` on a tiny Llama: greedy answers equal `model.generate`
with the adapter active (LoRA, (IA)3, prefix tuning, the base model), alone and in concurrent
mixed batches; streaming, stop strings, max_tokens, seeds and nucleus sampling; the limits and
one-line errors; the mixed-batch block against separate forwards."""

from __future__ import annotations

import json
import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from generative_helpers import greedy  # noqa: E402
from serve_helpers import running, save_random_adapter, tiny_chat_llama  # noqa: E402
from tiny_models import tiny_inputs, tiny_model  # noqa: E402

import adaptlab  # noqa: E402
from adaptlab.engine.rows import Rows, can_share_rows  # noqa: E402
from adaptlab.engine.sampling import StopText  # noqa: E402
from adaptlab.errors import ConfigError  # noqa: E402
from adaptlab.methods.state import get_state  # noqa: E402
from adaptlab.models.loading import load_model, load_tokenizer  # noqa: E402
from adaptlab.serve import AdapterService, ServeOptions, create_app  # noqa: E402
from adaptlab.serve.errors import RequestError  # noqa: E402
from adaptlab.serve.prompts import Prompts  # noqa: E402

CAUSAL = {"lora-a": "lora", "lora-b": "lora", "ia3": "ia3", "prefix": "prefix"}
PROMPTS = ["the cat sat on the", "hello world", "one two three four five", "paris is"]
NEAR_TIE = 1e-4
"""Logits this close may swap places between a batch of one and a padded mixed batch."""


def save_causal_adapter(model_dir: str, out: Path, method: str, seed: int) -> Path:
    """A causal-LM adapter with random tensors (far from the identity), saved as a folder."""
    model = load_model(model_dir, "causal_lm").model
    handle = adaptlab.add_adapter(model, "default", method, seed=seed, train_head=False)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in handle.tensors().values():
            tensor.add_(0.5 * torch.randn(tensor.shape, generator=generator))
    adaptlab.save_adapter(model, out, base_model_id=model_dir)
    return out


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny Llama with a chat template, four causal-LM adapters and a classifier."""
    root = tmp_path_factory.mktemp("generate")
    model_dir = tiny_chat_llama(root)
    registry = root / "registry"
    registry.mkdir()
    for seed, (name, method) in enumerate(CAUSAL.items()):
        save_causal_adapter(model_dir, registry / name, method, seed)
    save_random_adapter(model_dir, registry / "labels", "lora")
    return {"model": model_dir, "registry": registry}


@pytest.fixture(scope="module")
def service(setup: dict[str, Any]) -> Any:
    options = ServeOptions(
        model=setup["model"], adapters=str(setup["registry"]), max_loaded=2, max_tokens=64
    )
    service = AdapterService(options)  # fewer loaded than adapters: generating ones stay
    yield service
    service.close()


@pytest.fixture(scope="module")
def reference(setup: dict[str, Any]) -> Any:
    """`model.generate` with each adapter active (None: the base model)."""
    models: dict[str | None, Any] = {None: load_model(setup["model"], "causal_lm").model.eval()}
    for name in CAUSAL:
        model = load_model(setup["model"], "causal_lm").model.eval()
        adaptlab.load_adapter(model, setup["registry"] / name)
        models[name] = model
    return models


def name_of(setup: dict[str, Any], adapter: str | None) -> str:
    return adapter or setup["model"]


def post(url: str, path: str, body: dict[str, Any]) -> Any:
    return httpx.post(f"{url}/v1/{path}", json=body, timeout=120)


def assert_greedy(text: str, model: Any, ids: list[int], count: int, exact: bool) -> int:
    """`text` is what `model.generate` makes; in a mixed batch (not `exact`) it may leave that
    path only at a step whose two best logits are within rounding of each other. Returns how
    many tokens `generate` made."""
    tokenizer = load_tokenizer(model.name_or_path)
    tokens, logits = greedy(model, ids, count)
    wanted = tokenizer.decode(tokens, skip_special_tokens=True)
    if text == wanted or exact:
        assert text == wanted
        return len(tokens)
    step = max(k for k in range(len(tokens) + 1) if text.startswith(tokenizer.decode(tokens[:k])))
    top = logits[step].topk(2).values
    assert step < len(tokens) and float(top[0] - top[1]) < NEAR_TIE, (text, wanted)
    return len(tokens)


@pytest.mark.parametrize("adapter", [None, *CAUSAL])
def test_greedy_completions_equal_model_generate(
    url: str, setup: dict[str, Any], reference: Any, adapter: str | None
) -> None:
    tokenizer = load_tokenizer(setup["model"])
    for prompt in PROMPTS[:2]:
        body = {"model": name_of(setup, adapter), "prompt": prompt, "max_tokens": 12}
        response = post(url, "completions", {**body, "temperature": 0})
        assert response.status_code == 200, response.text
        answer = response.json()
        ids = tokenizer(prompt).input_ids
        text = answer["choices"][0]["text"]
        made = assert_greedy(text, reference[adapter], ids, 12, exact=True)
        assert answer["object"] == "text_completion" and answer["model"] == body["model"]
        assert answer["usage"]["prompt_tokens"] == len(ids)
        assert answer["usage"]["completion_tokens"] == made  # token for token, not only text
        reason = answer["choices"][0]["finish_reason"]
        assert reason == ("length" if made == 12 else "stop")


def test_chat_goes_through_the_template_and_equals_generate(
    url: str, setup: dict[str, Any], reference: Any
) -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    body = {"model": "lora-b", "messages": messages, "max_tokens": 10, "temperature": 0}
    answer = post(url, "chat/completions", body).json()
    tokenizer = load_tokenizer(setup["model"])
    rendered = "system: be brief\nuser: hi\nassistant:"
    ids = tokenizer(rendered, add_special_tokens=False).input_ids
    message = answer["choices"][0]["message"]
    assert message["role"] == "assistant" and answer["object"] == "chat.completion"
    assert answer["usage"]["prompt_tokens"] == len(ids)
    assert_greedy(message["content"], reference["lora-b"], ids, 10, exact=True)


def test_concurrent_mixed_requests_each_get_their_adapters_text(
    url: str, setup: dict[str, Any], reference: Any, service: AdapterService
) -> None:
    """24 clients at once over the base and four adapters (LoRA shares rows; (IA)3 and
    prefix run in their own lanes), with two adapters loaded at most when idle."""
    rng = random.Random(0)
    asks = [
        (rng.choice([None, *CAUSAL]), rng.choice(PROMPTS), rng.randint(3, 12)) for _ in range(24)
    ]

    def ask(request: tuple[str | None, str, int]) -> Any:
        adapter, prompt, count = request
        body = {"model": name_of(setup, adapter), "prompt": prompt, "max_tokens": count}
        return post(url, "completions", {**body, "temperature": 0})

    with ThreadPoolExecutor(24) as pool:
        answers = list(pool.map(ask, asks))
    tokenizer = load_tokenizer(setup["model"])
    for (adapter, prompt, count), answer in zip(asks, answers, strict=True):
        assert answer.status_code == 200, answer.text
        text = answer.json()["choices"][0]["text"]
        assert_greedy(text, reference[adapter], tokenizer(prompt).input_ids, count, exact=False)
    deadline = time.monotonic() + 30  # the step that sent the last answer may still be ending
    while service.generator.busy() or service.generator.adapters():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def read_events(response: Any) -> list[Any]:
    lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    return [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]


def test_streams_are_server_sent_events_of_the_same_text(url: str, setup: dict[str, Any]) -> None:
    body = {"model": "lora-a", "prompt": "hello world", "max_tokens": 9, "temperature": 0}
    whole = post(url, "completions", body).json()["choices"][0]["text"]
    stream = {**body, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", f"{url}/v1/completions", json=stream, timeout=120) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        chunks = read_events(response)
    assert "".join(c["choices"][0]["text"] for c in chunks[:-1]) == whole
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 9
    assert len({c["id"] for c in chunks}) == 1
    messages = [{"role": "user", "content": "hi"}]
    chat = {"model": "ia3", "messages": messages, "max_tokens": 5, "temperature": 0}
    whole = post(url, "chat/completions", chat).json()["choices"][0]["message"]["content"]
    with httpx.stream("POST", f"{url}/v1/chat/completions", json={**chat, "stream": True}) as r:
        chunks = read_events(r)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == whole
    assert chunks[-1]["object"] == "chat.completion.chunk"


def test_stop_max_tokens_seed_and_top_p_are_honoured(url: str, setup: dict[str, Any]) -> None:
    base = {"model": "lora-a", "prompt": "one two three four five", "temperature": 0}
    greedy = post(url, "completions", {**base, "max_tokens": 12}).json()["choices"][0]
    words = greedy["text"].split()
    assert len(words) >= 3  # the MiniLM vocabulary decodes to words with spaces between
    cut = post(url, "completions", {**base, "max_tokens": 12, "stop": [words[2], "zzz"]}).json()
    assert cut["choices"][0]["text"] == greedy["text"][: greedy["text"].find(words[2])]
    assert cut["choices"][0]["finish_reason"] == "stop"
    short = post(url, "completions", {**base, "max_tokens": 3}).json()
    assert short["choices"][0]["finish_reason"] == "length"
    assert short["usage"]["completion_tokens"] == 3
    sampled = {**base, "temperature": 1.5, "max_tokens": 12}
    texts = [post(url, "completions", {**sampled, "seed": s}).json() for s in (7, 7, 8, 9)]
    texts = [t["choices"][0]["text"] for t in texts]
    assert texts[0] == texts[1] and len(set(texts)) > 1
    nucleus = post(url, "completions", {**sampled, "top_p": 1e-9, "seed": 3}).json()
    assert nucleus["choices"][0]["text"] == greedy["text"]  # only the top token is left


def test_v1_models_lists_the_base_and_the_causal_adapters(url: str, setup: dict[str, Any]) -> None:
    listing = httpx.get(f"{url}/v1/models", timeout=60).json()
    rows = {row["id"]: row for row in listing["data"]}
    assert listing["object"] == "list"
    assert sorted(rows) == sorted([setup["model"], *CAUSAL])
    assert rows["lora-a"]["parent"] == setup["model"] and rows[setup["model"]]["parent"] is None
    adapters = {a["name"]: a for a in httpx.get(f"{url}/adapters", timeout=60).json()["adapters"]}
    assert (
        adapters["prefix"]["task"] == "causal_lm" and adapters["labels"]["task"] == "single_label"
    )


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("completions", {"model": "nope", "prompt": "a"}, 404, "no adapter 'nope' in the registry"),
        ("completions", {"model": "../x", "prompt": "a"}, 400, "never a path"),
        ("completions", {"model": "labels", "prompt": "a"}, 400, "labels text): ask /predict"),
        ("completions", {"model": "ia3", "prompt": "a", "max_tokens": 0}, 422, "max_tokens: In"),
        ("completions", {"model": "ia3", "prompt": "a", "max_tokens": 65}, 400, "limit of 64"),
        ("completions", {"model": "ia3", "prompt": "a b " * 1100}, 400, "this model takes 2048"),
        ("completions", {"model": "ia3", "prompt": "a" * 10_001}, 413, "the limit is 10000"),
        ("completions", {"model": "ia3", "prompt": "a", "stop": ["a"] * 5}, 400, "at most 4"),
        ("completions", {"model": "ia3", "prompt": "a", "temperature": 3}, 422, "temperature"),
        ("completions", {"model": "ia3", "prompt": "a", "n": 2}, 422, "n: Input should be less"),
        ("completions", {"model": "ia3", "prompt": "a", "echo": True}, 422, "echo: Extra inputs"),
        ("completions", {"model": "ia3", "prompt": ["a"]}, 422, "prompt: Input should be"),
        ("chat/completions", {"model": "ia3", "messages": []}, 422, "messages: List should"),
        (
            "chat/completions",
            {"model": "ia3", "messages": [{"role": "tool", "content": "x"}]},
            422,
            "messages[0].role",
        ),
    ],
)
def test_bad_requests_are_refused_in_one_line(
    url: str, path: str, body: dict[str, Any], status: int, message: str
) -> None:
    response = post(url, path, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert message in error["message"] and "\n" not in error["message"]
    assert error["code"] == status


def test_predict_refuses_causal_adapters(url: str) -> None:
    response = httpx.post(f"{url}/predict", json={"adapter": "lora-a", "texts": ["a"]}, timeout=60)
    assert response.status_code == 400
    assert "ask POST /v1/completions" in response.json()["error"]


def test_a_tokenizer_without_a_chat_template_refuses_chats(setup: dict[str, Any]) -> None:
    tokenizer = load_tokenizer(setup["model"])
    tokenizer.chat_template = None
    prompts = Prompts(tokenizer, window=64, max_chars=100, max_tokens=8)
    with pytest.raises(RequestError, match="has no chat template") as refused:
        prompts.check_chat([{"role": "user", "content": "hi"}], None)
    assert refused.value.status == 400


def test_stop_text_holds_back_what_a_stop_string_could_still_remove() -> None:
    text = StopText(["END"])
    sent = []
    for whole in ["a", "a E", "a EN", "a ENx", "a ENx E", "a ENx END tail"]:
        text.update(whole)
        sent.append(text.fresh(final=False))
    assert sent == ["a", " ", "", "ENx", " ", ""] and text.stopped
    assert "".join(sent) == text.text == "a ENx "  # the held "E" was the stop string's start
    text = StopText([])
    text.update("caf\ufffd")
    assert text.fresh(final=False) == "caf"  # an incomplete character waits for its bytes


def test_rows_run_each_adapter_on_its_slice_as_separate_forwards() -> None:
    model = tiny_model("llama", causal=True)
    for index, method in enumerate(["lora", "lora", "ia3", "prefix"]):
        handle = adaptlab.add_adapter(model, f"a{index}", method, seed=index, train_head=False)
        with torch.no_grad():
            for tensor in handle.tensors().values():
                tensor.add_(0.5 * torch.randn_like(tensor))
    adapters = get_state(model).adapters  # type: ignore[union-attr]
    assert [can_share_rows(adapters, f"a{i}") for i in range(4)] == [True, True, False, False]
    ids = tiny_inputs(batch=5)["input_ids"]

    def logits(composition: Any, rows: torch.Tensor) -> torch.Tensor:
        adaptlab.set_active(model, composition)
        with torch.no_grad():
            return model(input_ids=rows).logits

    separate = torch.cat([logits(None, ids[:1]), logits("a0", ids[1:3]), logits("a1", ids[3:])])
    mixed = logits(Rows([("a0", 1, 3), ("a1", 3, 5)]), ids)
    torch.testing.assert_close(mixed, separate, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(separate[1:3], logits(None, ids[1:3]), atol=1e-3)
    with pytest.raises(ConfigError, match="inputs, weights, attention keys"):
        adaptlab.set_active(model, Rows([("a2", 0, 2)]))


def test_an_adapter_left_active_in_a_mixed_batch_can_still_be_evicted(
    setup: dict[str, Any], reference: Any
) -> None:
    """With room for one adapter, each request evicts the last one, which the model's mixed
    batch (`Rows`) still names: it is switched off before it leaves."""
    options = ServeOptions(model=setup["model"], adapters=str(setup["registry"]), max_loaded=1)
    service = AdapterService(options)
    tokenizer = load_tokenizer(setup["model"])
    try:
        with running(create_app(service)) as url:
            for adapter in ("lora-a", "lora-b", "lora-a"):
                body = {"model": adapter, "prompt": PROMPTS[0], "max_tokens": 4, "temperature": 0}
                response = post(url, "completions", body)
                assert response.status_code == 200, response.text
                text = response.json()["choices"][0]["text"]
                ids = tokenizer(PROMPTS[0]).input_ids
                assert_greedy(text, reference[adapter], ids, 4, exact=True)
                assert service.pool.names == [adapter]
    finally:
        service.close()

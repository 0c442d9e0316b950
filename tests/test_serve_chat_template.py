"""An adapter saved with a chat template (the one it was trained with) serves chats with it:
`adaptlab serve` renders its /v1/chat/completions with the adapter's template, not the base
tokenizer's (which may have another or none), says in /v1/models which models take chats, and
answers a template that fails on the messages with a 400 in one line. The manifest's
`chat_template` is untrusted input: a bad value is one line naming the field; a manifest
without one still reads."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from cli_cases import refused  # noqa: E402
from serve_helpers import (  # noqa: E402
    CHAT_TEMPLATE,
    running,
    save_lm_adapter,
    tiny_chat_llama,
)
from tiny_models import save_tiny_llama  # noqa: E402

import adaptlab  # noqa: E402
from adaptlab.errors import AdaptlabError, ConfigError  # noqa: E402
from adaptlab.methods.manifest import (  # noqa: E402
    MAX_CHAT_TEMPLATE_BYTES,
    adapter_folder,
    parse_manifest,
)
from adaptlab.models.loading import load_model, load_tokenizer  # noqa: E402
from adaptlab.serve import AdapterService, ServeOptions, create_app  # noqa: E402
from adaptlab.serve.registry import scan_registry  # noqa: E402

ADAPTER_TEMPLATE = (
    "{% for m in messages %}<< {{ m['role'] }} >> {{ m['content'] }} | {% endfor %}"
    "{% if add_generation_prompt %}<< reply >>{% endif %}"
)
"""Not the base's template (`CHAT_TEMPLATE`): other tokens for the same messages."""
MESSAGES = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "one two three"},
]
BROKEN = {
    "bad-syntax": ("{% for m in messages %}{{ m['content'] }}", "Unexpected end of template"),
    "bad-escape": (
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "access to attribute '__class__' of 'str' object is unsafe",
    ),
    "bad-mutate": (
        "{{ messages.append({'role': 'system', 'content': 'x'}) }}",
        "access to attribute 'append' of 'list' object is unsafe",
    ),
    "bad-raise": ("{{ raise_exception('roles must alternate') }}", "roles must alternate"),
    "bad-divide": ("{{ 1 / 0 }}", "division by zero"),
    "bad-recurse": ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "recursion"),
    "bad-range": ("{% for i in range(10**9) %}x{% endfor %}", "Range too big"),
    "bad-surrogate": ('{{ "\\ud800" }}x', "surrogates not allowed"),
    "bad-empty": ("{% if false %}x{% endif %}", "rendered the messages as no tokens"),
}
"""Adapters whose template fails on any chat: name -> (template, what the refusal says)."""


def serve(model_dir: str, registry: Path) -> AdapterService:
    return AdapterService(ServeOptions(model=model_dir, adapters=str(registry), max_tokens=8))


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Two tiny Llamas, one with a chat template and one without, each serving a registry of
    `tuned` (a run folder whose adapter has `ADAPTER_TEMPLATE`) and `plain` (no template);
    the first also serves the `BROKEN` adapters."""
    root = tmp_path_factory.mktemp("chat-template")
    templated = tiny_chat_llama(root)
    bare = save_tiny_llama(str(root / "bare-llama"))
    setups = {}
    for kind, model_dir in (("templated", templated), ("bare", bare)):
        registry = root / f"{kind}-registry"
        save_lm_adapter(model_dir, registry / "tuned" / "adapter", ADAPTER_TEMPLATE)
        save_lm_adapter(model_dir, registry / "plain")
        setups[kind] = {"model": model_dir, "registry": registry}
    for name, (template, _) in BROKEN.items():
        save_lm_adapter(templated, setups["templated"]["registry"] / name, template)
    services = {kind: serve(s["model"], s["registry"]) for kind, s in setups.items()}
    with (
        running(create_app(services["templated"])) as url,
        running(create_app(services["bare"])) as bare_url,
    ):
        yield {
            kind: {**setups[kind], "service": services[kind], "url": address}
            for kind, address in (("templated", url), ("bare", bare_url))
        }
    for service in services.values():
        service.close()


def rendered(model_dir: str, template: str) -> list[int]:
    """What `apply_chat_template` makes of `MESSAGES` with `template`, as token ids of the
    text."""
    tokenizer = load_tokenizer(model_dir)
    text = tokenizer.apply_chat_template(
        MESSAGES, chat_template=template, add_generation_prompt=True, tokenize=False
    )
    ids: list[int] = tokenizer(text, add_special_tokens=False).input_ids
    return ids


def chat(site: dict[str, Any], model: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list]:
    """POST `MESSAGES` to `model`'s chat completions; the answer and the prompts queued."""
    service, seen = site["service"], []
    generate = service.generate

    def spy(job: Any) -> None:
        seen.append(list(job.prompt))
        generate(job)

    monkeypatch.setattr(service, "generate", spy)
    body = {"model": model, "messages": MESSAGES, "max_tokens": 2, "temperature": 0}
    response = httpx.post(f"{site['url']}/v1/chat/completions", json=body, timeout=120)
    monkeypatch.undo()
    return response, seen


def refusal(response: Any, status: int) -> str:
    """The one line of an OpenAI-shaped refusal with `status`."""
    assert response.status_code == status, response.text
    message = response.json()["error"]["message"]
    assert isinstance(message, str) and "\n" not in message, message
    return str(message)


# -- serving ---------------------------------------------------------------------------------


def test_an_adapter_s_chats_are_rendered_with_its_own_template(
    setup: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = setup["templated"]
    own, base = rendered(site["model"], ADAPTER_TEMPLATE), rendered(site["model"], CHAT_TEMPLATE)
    assert own != base
    for model, wanted in (("tuned", own), ("plain", base), (site["model"], base)):
        response, seen = chat(site, model, monkeypatch)
        assert response.status_code == 200, response.text
        assert seen == [wanted], model
        assert response.json()["usage"]["prompt_tokens"] == len(wanted)


def test_a_base_without_a_template_serves_chats_to_an_adapter_with_one(
    setup: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = setup["bare"]
    assert not load_tokenizer(site["model"]).chat_template
    response, seen = chat(site, "tuned", monkeypatch)
    assert response.status_code == 200, response.text
    assert seen == [rendered(site["model"], ADAPTER_TEMPLATE)]
    assert response.json()["choices"][0]["message"]["role"] == "assistant"
    for model in ("plain", site["model"]):
        response, seen = chat(site, model, monkeypatch)
        assert refusal(response, 400).startswith("this model's tokenizer has no chat template")
        assert seen == []


def test_v1_models_says_which_models_take_chats(setup: Any) -> None:
    listed = {}
    for kind in ("templated", "bare"):
        rows = httpx.get(f"{setup[kind]['url']}/v1/models", timeout=60).json()["data"]
        listed[kind] = {row["id"]: row["chat"] for row in rows}
    templated, bare = setup["templated"]["model"], setup["bare"]["model"]
    assert listed["bare"] == {bare: False, "plain": False, "tuned": True}
    assert listed["templated"] == {
        templated: True,
        "plain": True,
        "tuned": True,
        **{name: True for name in BROKEN},
    }


@pytest.mark.parametrize("model", ["tuned", "plain"])
def test_completions_ignore_the_template(setup: Any, model: str) -> None:
    site = setup["bare"]
    body = {"model": model, "prompt": "one two three", "max_tokens": 3, "temperature": 0}
    response = httpx.post(f"{site['url']}/v1/completions", json=body, timeout=120)
    assert response.status_code == 200, response.text
    prompt_ids = load_tokenizer(site["model"])("one two three").input_ids
    assert response.json()["usage"]["prompt_tokens"] == len(prompt_ids)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_template_that_fails_on_the_messages_is_a_400_in_one_line(
    setup: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = setup["templated"]
    response, seen = chat(site, name, monkeypatch)
    message = refusal(response, 400)
    assert message.startswith(f"the chat template of adapter {name!r} "), message
    assert BROKEN[name][1] in message
    assert seen == []  # nothing was queued
    deadline = time.monotonic() + 30
    while site["service"].generator.busy():
        assert time.monotonic() < deadline, "the model thread is still busy"
        time.sleep(0.01)
    fine, _ = chat(site, "tuned", monkeypatch)
    assert fine.status_code == 200, fine.text


# -- the manifest field ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved(setup: Any) -> Path:
    """The adapter folder of `tuned` (saved with `ADAPTER_TEMPLATE`)."""
    return adapter_folder(setup["templated"]["registry"] / "tuned")


def edited(source: Path, tmp_path: Path, **fields: Any) -> Path:
    """A copy of the adapter folder `source` with manifest `fields` set (None: removed)."""
    folder = tmp_path / "edited"
    shutil.copytree(source, folder)
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    for key, value in fields.items():
        if value is None:
            manifest.pop(key, None)
        else:
            manifest[key] = value
    path.write_text(json.dumps(manifest))
    return folder


def test_the_template_round_trips_and_the_adapter_still_loads(setup: Any, saved: Path) -> None:
    manifest = json.loads((saved / "manifest.json").read_text())
    assert manifest["chat_template"] == ADAPTER_TEMPLATE
    assert parse_manifest(saved).chat_template == ADAPTER_TEMPLATE
    model = load_model(setup["templated"]["model"], "causal_lm").model
    adaptlab.load_adapter(model, saved)
    plain = adapter_folder(setup["templated"]["registry"] / "plain")
    assert "chat_template" not in json.loads((plain / "manifest.json").read_text())
    assert parse_manifest(plain).chat_template is None


def test_a_manifest_without_the_field_still_reads(setup: Any, saved: Path, tmp_path: Path) -> None:
    folder = edited(saved, tmp_path, chat_template=None)
    assert parse_manifest(folder).chat_template is None
    adaptlab.load_adapter(load_model(setup["templated"]["model"], "causal_lm").model, folder)


def test_the_largest_template_and_any_unicode_are_taken(saved: Path, tmp_path: Path) -> None:
    largest = "é" * (MAX_CHAT_TEMPLATE_BYTES // 2)  # two bytes of UTF-8 each
    folder = edited(saved, tmp_path, chat_template=largest)
    assert parse_manifest(folder).chat_template == largest


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        (123, "a non-empty string"),
        (True, "a non-empty string"),
        ([ADAPTER_TEMPLATE], "a non-empty string"),
        ({"default": ADAPTER_TEMPLATE}, "a non-empty string"),
        ("", "a non-empty string"),
        (" \n\t", "a non-empty string"),
        ("\ud800{{ x }}", "valid Unicode text"),
        ("x" * (MAX_CHAT_TEMPLATE_BYTES + 1), "at most 65,536 bytes of UTF-8 (it has 65,537)"),
        ("é" * (MAX_CHAT_TEMPLATE_BYTES // 2 + 1), "at most 65,536 bytes of UTF-8 (it has 65,538)"),
    ],
)
def test_a_bad_template_in_a_manifest_is_one_line_naming_the_field(
    saved: Path, tmp_path: Path, value: Any, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = edited(saved, tmp_path, chat_template=value)
    with pytest.raises(AdaptlabError, match="chat_template must be") as error:
        parse_manifest(folder)
    message = str(error.value)
    assert needle in message and "\n" not in message and len(message) < 300, message
    refused(["adapters", "show", str(folder)], capsys, "chat_template must be", needle)


def test_the_registry_refuses_a_folder_with_a_bad_template(saved: Path, tmp_path: Path) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    shutil.copytree(edited(saved, tmp_path, chat_template=7), registry / "odd")
    shutil.copytree(saved, registry / "fine")
    scanned = scan_registry(registry, lambda manifest: None)
    assert list(scanned.entries) == ["fine"]
    assert "chat_template must be a non-empty string" in scanned.refused["odd"]


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("", "a non-empty string"),
        ("\ud800", "valid Unicode text"),
        ("x" * (MAX_CHAT_TEMPLATE_BYTES + 1), "at most 65,536 bytes"),
    ],
)
def test_saving_a_bad_template_is_refused_before_anything_is_written(
    setup: Any, tmp_path: Path, value: str, needle: str
) -> None:
    folder = tmp_path / "adapter"
    with pytest.raises(ConfigError, match="chat_template must be") as error:
        save_lm_adapter(setup["bare"]["model"], folder, value)
    assert needle in str(error.value) and "\n" not in str(error.value)
    assert not folder.exists()

"""The official `openai` client against a real `adaptlab serve` on SmolLM2-135M: two LoRA
adapters and the base model each answer a completion, a chat completion and a streamed
completion, the greedy text equal to `model.generate`'s with that adapter active."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import torch

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from serve_helpers import free_port, wait_for_health  # noqa: E402

import adaptlab  # noqa: E402
from adaptlab.models.loading import load_model  # noqa: E402

pytestmark = pytest.mark.real

BASE = "smollm2-135m"
ADAPTERS = ("news-lora", "chat-lora")
PROMPT = "The capital of France is"
CHAT = [{"role": "user", "content": "Name a colour."}]
TOKENS = 6


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A registry of two LoRA adapters (random tensors) and the model that made them."""
    registry = tmp_path_factory.mktemp("registry")
    loaded = load_model(BASE, "causal_lm")
    model = loaded.model.eval()
    for seed, name in enumerate(ADAPTERS):
        handle = adaptlab.add_adapter(model, name, "lora", seed=seed, train_head=False)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for tensor in handle.tensors().values():
                tensor.add_(0.05 * torch.randn(tensor.shape, generator=generator))
        adaptlab.save_adapter(model, registry / name, name=name, base_model_id=BASE)
    return {"registry": registry, "model": model, "tokenizer": loaded.tokenizer}


@pytest.fixture(scope="module")
def client(models: dict[str, Any]) -> Iterator[Any]:
    """The `openai` client pointed at `adaptlab serve` started on a free port."""
    port = free_port()
    command = [sys.executable, "-c", "from adaptlab.cli.app import main; main()", "serve"]
    command += ["--model", BASE, "--adapters", str(models["registry"]), "--port", str(port)]
    server = subprocess.Popen(
        [*command, "--device", "cpu"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(server, url)
        yield openai.OpenAI(base_url=f"{url}/v1", api_key="unused", timeout=300)
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=60)
        assert "generating text at /v1" in output, output


def greedy(models: dict[str, Any], adapter: str | None, ids: list[int]) -> str:
    """What `model.generate` says with `adapter` active (None: the base model)."""
    model, tokenizer = models["model"], models["tokenizer"]
    adaptlab.set_active(model, adapter)
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=TOKENS, do_sample=False)
    tokens = out[0, len(ids) :].tolist()
    if model.generation_config.eos_token_id in tokens:
        tokens = tokens[: tokens.index(model.generation_config.eos_token_id)]
    return str(tokenizer.decode(tokens, skip_special_tokens=True))


def test_the_openai_client_gets_model_generate_s_text_from_every_model(
    client: Any, models: dict[str, Any]
) -> None:
    tokenizer = models["tokenizer"]
    listed = [m.id for m in client.models.list()]
    assert listed == [BASE, *sorted(ADAPTERS)]
    prompt_ids = tokenizer(PROMPT).input_ids
    chat_ids = tokenizer.apply_chat_template(CHAT, add_generation_prompt=True)["input_ids"]
    texts = {}
    for name in listed:
        adapter = None if name == BASE else name
        wanted = greedy(models, adapter, prompt_ids)
        answer = client.completions.create(
            model=name, prompt=PROMPT, max_tokens=TOKENS, temperature=0
        )
        assert answer.choices[0].text == wanted and answer.model == name
        assert answer.usage.prompt_tokens == len(prompt_ids)
        chat = client.chat.completions.create(
            model=name, messages=CHAT, max_tokens=TOKENS, temperature=0
        )
        assert chat.choices[0].message.content == greedy(models, adapter, chat_ids)
        stream = client.completions.create(
            model=name, prompt=PROMPT, max_tokens=TOKENS, temperature=0, stream=True
        )
        chunks = list(stream)
        assert "".join(c.choices[0].text for c in chunks) == wanted
        assert chunks[-1].choices[0].finish_reason in ("stop", "length")
        texts[name] = wanted
    assert "Paris" in texts[BASE]
    assert len(set(texts.values())) > 1  # the adapters change what the model says
    with pytest.raises(openai.NotFoundError, match="no adapter 'nope' in the registry"):
        client.completions.create(model="nope", prompt=PROMPT, max_tokens=1)

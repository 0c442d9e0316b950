"""A registry of tiny trained adapters and a real uvicorn server on a free port, for tests."""

from __future__ import annotations

import csv
import json
import random
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

import adaptlab
from adaptlab.models.loading import load_model, load_tokenizer
from adaptlab.records.config import TrainConfig
from adaptlab.runs.run import RunSpec, execute

MOODS = {
    "fresh": ["great", "lovely", "fun", "superb"],
    "rotten": ["dull", "awful", "bad", "boring"],
}
TOPICS = {
    "sport": ["goal", "match", "team"],
    "food": ["bread", "soup", "cheese"],
    "law": ["court", "judge", "vote"],
}


def write_csv(path: Path, words: dict[str, list[str]], rows: int) -> Path:
    rng = random.Random(0)
    labels = sorted(words)
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        for i in range(rows):
            label = labels[i % len(labels)]
            writer.writerow([f"a {rng.choice(words[label])} {rng.choice(words[label])}", label])
    return path


def write_ner(path: Path) -> Path:
    lines = []
    for i in range(40):
        lines += [f"{'Paris' if i % 2 else 'Rome'}\tB-LOC", "is\tO", "nice\tO", ""]
    path.write_text("\n".join(lines))
    return path


def train(model: str, data: Path, method: str, out: Path, **kwargs: object) -> Path:
    config = TrainConfig(epochs=1, batch_size=8, learning_rate=1e-3, seed=0)
    execute(RunSpec.build(model, str(data), method, train=config, **kwargs), out, progress=False)
    return out


def save_random_adapter(
    model_dir: str,
    out: Path,
    method: str,
    *,
    task: str = "single_label",
    labels: tuple[str, ...] = ("fresh", "rotten"),
    seed: int = 0,
    fuse: dict[str, Path] | None = None,
) -> Path:
    """An untrained adapter (or a fusion over saved ones) with random tensors, saved as a
    folder like a trained one: quick to make, and unlike every other adapter."""
    model = load_model(model_dir, task, label_names=labels, seed=0).model
    if fuse:
        for name, folder in fuse.items():
            adaptlab.load_adapter(model, folder, name=name, activate=False, with_head=False)
        handle = adaptlab.add_fusion(model, adaptlab.Fuse(*fuse), name="fusion", seed=seed)
    else:
        handle = adaptlab.add_adapter(model, "default", method, seed=seed)
    adaptlab.train_adapter(model, handle.name)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in handle.tensors().values():
            tensor.add_(0.3 * torch.randn(tensor.shape, generator=generator))
    adaptlab.save_adapter(
        model,
        out,
        name=handle.name,
        base_model_id=model_dir,
        task=task,
        label_names=labels,
        metrics={"test": {"accuracy": 0.5}},
    )
    return out


NEAR_TIE = 0.5 + 1e-5
"""A top probability up to this leaves room for another class within rounding of the top one."""


def assert_same_predictions(served: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """`served` answers as `expected` does (single-label or token predictions): the same texts
    and words, probabilities within 1e-5, and the same label wherever one wins by more than
    rounding.

    Batches mix other requests' texts and padding, which round differently on some CPUs, so a
    label may differ where two classes are tied to within rounding; only a top probability
    of at most 1/2 leaves room for such a tie.
    """
    assert len(served) == len(expected)
    for got, want in zip(served, expected, strict=True):
        assert got.keys() == want.keys()
        assert got["text"] == want["text"] and got.get("words") == want.get("words")
        assert got["probability"] == pytest.approx(want["probability"], abs=1e-5)
        if "words" in want:  # a token task: a tag and its probability per word
            labels, wanted, tops = got["label"], want["label"], want["probability"]
        else:
            labels, wanted, tops = [got["label"]], [want["label"]], [want["probability"]]
        assert len(labels) == len(wanted) == len(tops)
        for label, expected_label, top in zip(labels, wanted, tops, strict=True):
            assert label == expected_label or top <= NEAR_TIE, (got, want)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running(app: object) -> Iterator[str]:
    """Serve `app` with uvicorn on a free local port; yields its base URL."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")  # type: ignore[arg-type]
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def wait_for_health(server: subprocess.Popen[str], url: str, seconds: float = 300) -> int:
    """Poll `url`/health until the server there answers, which it must do within `seconds`
    without exiting; the answer's status code comes back."""
    import httpx

    deadline = time.monotonic() + seconds
    while True:
        try:
            return httpx.get(f"{url}/health", timeout=10).status_code
        except httpx.TransportError:
            assert server.poll() is None and time.monotonic() < deadline
            time.sleep(0.5)


def set_fingerprint(folder: Path, value: str) -> None:
    path = folder / "adapter" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["base_model"]["fingerprint"] = value
    path.write_text(json.dumps(manifest))


CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
"""A chat template short enough for a tiny model's window."""


def tiny_chat_llama(root: Path, template: str = CHAT_TEMPLATE) -> str:
    """A tiny random Llama causal LM whose tokenizer has `template`, saved under `root`."""
    from tiny_models import save_tiny_llama

    model_dir = save_tiny_llama(str(root / "tiny-llama"))
    tokenizer = load_tokenizer(model_dir)
    tokenizer.chat_template = template
    tokenizer.save_pretrained(model_dir)
    return model_dir


def save_lm_adapter(model_dir: str, folder: Path, template: str | None = None) -> Path:
    """A causal-LM LoRA (an identity: it generates as the base does) saved with `template`."""
    model = load_model(model_dir, "causal_lm").model
    adaptlab.add_adapter(model, "default", "lora", seed=0, train_head=False)
    return adaptlab.save_adapter(model, folder, base_model_id=model_dir, chat_template=template)


def chat_registry(root: Path, template: str = CHAT_TEMPLATE) -> dict[str, Any]:
    """A tiny chat Llama and a registry holding a causal-LM LoRA `lm` (an identity, so it
    generates as the base does) and a random classifier `labels`."""
    model_dir = tiny_chat_llama(root, template)
    registry = root / "registry"
    registry.mkdir()
    save_lm_adapter(model_dir, registry / "lm")
    save_random_adapter(model_dir, registry / "labels", "lora")
    return {"root": root, "model": model_dir, "registry": registry}

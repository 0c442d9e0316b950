"""Shared pytest set-up: keep tests offline and quiet; in CI, refuse to skip the serve tests;
the fixtures several test modules share."""

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

SERVE_MODULES = ("fastapi", "uvicorn", "httpx", "prometheus_client", "ray.serve")
"""What the serve and ray extras bring; the serve tests skip without them, except in CI."""


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("ADAPTLAB_REQUIRE_EXTRAS") != "1":
        return
    missing = [name for name in SERVE_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise pytest.UsageError(
            f"ADAPTLAB_REQUIRE_EXTRAS=1 but {', '.join(missing)} cannot be imported: install "
            "the extras (make setup) so that the serve tests run instead of skipping"
        )


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """One torch thread for a whole test module (`pytestmark = usefixtures(...)`)."""
    from study_helpers import one_thread

    with one_thread():
        yield


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray of two CPUs for the test module (skips where Ray is not installed)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
def feature_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """adaptlab's cache (ADAPTLAB_CACHE) in the test's `tmp_path`: its folder."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ADAPTLAB_CACHE", str(cache))
    return cache


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random BERT with the MiniLM tokenizer, saved once per test module."""
    from tiny_models import save_tiny_bert

    return save_tiny_bert(str(tmp_path_factory.mktemp("tiny-bert")))


@pytest.fixture(scope="module")
def tiny_model(tiny_model_dir: str) -> Path:
    """The tiny random BERT's folder as a Path."""
    return Path(tiny_model_dir)


@pytest.fixture(scope="module")
def trained(tiny_model_dir: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished one-epoch run folder of the tiny BERT on a learnable CSV, once per module."""
    from cli_cases import train_run, write_reviews

    folder = tmp_path_factory.mktemp("trained")
    return train_run(tiny_model_dir, write_reviews(folder / "reviews.csv"), folder / "run")


@pytest.fixture(scope="module")
def stages(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Two small learnable classification stages (CSV files), written once per test module."""
    from test_continual_sequence import write_stage

    folder = tmp_path_factory.mktemp("stages")
    return write_stage(folder, "sentiment"), write_stage(folder, "topic")


@pytest.fixture(scope="module")
def decoder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random Llama with an EOS token and a chat template, saved once per test module."""
    from generative_helpers import tiny_decoder

    return tiny_decoder(tmp_path_factory.mktemp("decoder"))


@pytest.fixture(scope="module")
def url(service: Any) -> Iterator[str]:
    """The test module's `service` fixture served with uvicorn on a free local port: its base
    URL."""
    from serve_helpers import running

    from adaptlab.serve import create_app

    with running(create_app(service)) as base_url:
        yield base_url

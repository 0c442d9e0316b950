"""`adaptlab serve --ray`: the same app as Ray Serve replicas on a local 2-CPU Ray, each
replica wanting the server's key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

from serve_helpers import MOODS, assert_same_predictions, free_port, train, write_csv  # noqa: E402
from tiny_models import save_tiny_bert  # noqa: E402

from adaptlab.errors import ConfigError  # noqa: E402
from adaptlab.serve import AdapterService, ServeOptions  # noqa: E402

TEXTS = ["a great fun film", "a dull awful film", "lovely"]
KEY = "sk-ray-5d1c0e9a"
WITH_KEY = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.serve")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        from ray import serve

        serve.shutdown()
        ray.shutdown()


@pytest.mark.ray
def test_ray_serve_replicas_answer_like_the_local_service(local_ray: None, tmp_path: Path) -> None:
    import httpx

    from adaptlab.serve import ray_serve

    model = save_tiny_bert(str(tmp_path / "tiny-bert"))
    registry = tmp_path / "registry"
    train(model, write_csv(tmp_path / "reviews.csv", MOODS, 32), "lora", registry / "rt-lora")
    options = ServeOptions(model=model, adapters=str(registry), api_key=KEY)
    with pytest.raises(ConfigError, match="--replicas must be"):
        ray_serve.deployment(options, replicas=0)
    port = free_port()
    ray_serve.run(options, replicas=2, host="127.0.0.1", port=port, blocking=False)
    url = f"http://127.0.0.1:{port}"
    body = {"adapter": "rt-lora", "texts": TEXTS}
    answers = [
        httpx.post(f"{url}/predict", json=body, headers=WITH_KEY, timeout=120) for _ in range(4)
    ]
    for headers in ({}, {"Authorization": "Bearer wrong"}):  # every replica wants the key
        for _ in range(4):
            denied = httpx.post(f"{url}/predict", json=body, headers=headers, timeout=120)
            assert denied.status_code == 401 and "key" in denied.json()["error"]
    health = httpx.get(f"{url}/health", timeout=60)
    assert health.status_code == 200  # a replica's threads were set before its torch loaded
    assert (health.json()["threads"], health.json()["wait_policy"]) == (1, "PASSIVE")
    local = AdapterService(options)
    try:
        expected = [p.to_dict() for p in local.predict("rt-lora", TEXTS).result(120)]
    finally:
        local.close()
    for response in answers:
        assert response.status_code == 200, response.text
        assert_same_predictions(response.json()["predictions"], expected)
    bad = {"adapter": "../x", "texts": ["a"]}
    refused = httpx.post(f"{url}/predict", json=bad, headers=WITH_KEY, timeout=60)
    assert refused.status_code == 400 and "never a path" in refused.json()["error"]
    listing = httpx.get(f"{url}/adapters", headers=WITH_KEY, timeout=60).json()
    assert [row["name"] for row in listing["adapters"]] == ["rt-lora"]

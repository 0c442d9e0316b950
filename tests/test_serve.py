"""`adaptlab serve` over real HTTP: predictions equal `adaptlab predict`, concurrent mixed
adapters stay apart, bad requests are refused in one line, the registry reloads."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")
httpx = pytest.importorskip("httpx")

from serve_helpers import (  # noqa: E402
    MOODS,
    TOPICS,
    assert_same_predictions,
    free_port,
    running,
    save_random_adapter,
    set_fingerprint,
    train,
    write_csv,
)
from tiny_models import save_tiny_bert  # noqa: E402

import adaptlab  # noqa: E402
from adaptlab.cli.app import main  # noqa: E402
from adaptlab.errors import AdapterFileError  # noqa: E402
from adaptlab.serve import AdapterService, ServeOptions, create_app  # noqa: E402

ADAPTERS = ("fusion", "ner", "rt-houlsby", "rt-lora", "topics")
TEXTS = [
    "a great fun film",
    "a dull awful film",
    "Rome is nice",
    "the judge and the court",
    "goal match team soup",
    "lovely",
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny base, a registry of five adapters (a trained run; 2 and 3 labels, token tags, a
    fusion over two of them, with random tensors), and folders the registry must refuse."""
    root = tmp_path_factory.mktemp("serve")
    model = Path(save_tiny_bert(str(root / "tiny-bert")))
    registry = root / "registry"
    registry.mkdir()
    train(str(model), write_csv(root / "reviews.csv", MOODS, 32), "lora", registry / "rt-lora")
    save_random_adapter(str(model), registry / "rt-houlsby", "houlsby", seed=1)
    topics = tuple(sorted(TOPICS))
    save_random_adapter(str(model), registry / "topics", "pfeiffer", labels=topics, seed=2)
    ner = ("O", "B-LOC", "I-LOC")
    save_random_adapter(str(model), registry / "ner", "lora", task="token", labels=ner, seed=3)
    members = {"topics": registry / "topics", "rt-lora": registry / "rt-lora" / "adapter"}
    save_random_adapter(str(model), registry / "fusion", "fusion", fuse=members, seed=4)
    shutil.copytree(registry / "rt-lora", registry / "other-base")
    set_fingerprint(registry / "other-base", "0123456789abcdef")
    shutil.copytree(registry / "rt-lora", registry / "bad.name")
    (registry / "broken").mkdir()
    (registry / "broken" / "manifest.json").write_text("{")
    outside = root / "outside"
    shutil.copytree(registry / "rt-lora", outside)
    (registry / "link-out").symlink_to(outside)
    return {"root": root, "model": model, "registry": registry}


@pytest.fixture(scope="module")
def service(setup: dict[str, Path]) -> Any:
    options = ServeOptions(
        model=str(setup["model"]),
        adapters=str(setup["registry"]),
        max_loaded=3,  # fewer than the adapters: mixed traffic loads and evicts
        max_wait_ms=20,
        max_texts=8,
        max_chars=200,
    )
    service = AdapterService(options)
    yield service
    service.close()


def post(url: str, body: Any, **kwargs: Any) -> Any:
    return httpx.post(f"{url}/predict", json=body, timeout=60, **kwargs)


@pytest.fixture(scope="module")
def expected(setup: dict[str, Path]) -> dict[str, list[dict[str, Any]]]:
    """Every adapter's `adaptlab predict --jsonl` output on TEXTS."""
    import io
    from contextlib import redirect_stdout

    answers = {}
    for adapter in ADAPTERS:
        with redirect_stdout(io.StringIO()) as out:
            inputs = setup["root"] / "inputs.txt"
            inputs.write_text("\n".join(TEXTS) + "\n")
            args = ["predict", "--adapter", str(setup["registry"] / adapter)]
            args += ["--input", str(inputs), "--jsonl", "--model", str(setup["model"])]
            with pytest.raises(SystemExit) as done:
                main(args)
                raise SystemExit(0)
            assert done.value.code in (0, None)
        answers[adapter] = [json.loads(line) for line in out.getvalue().splitlines()]
    return answers


def test_every_adapter_answers_as_adaptlab_predict(
    url: str, expected: dict[str, list[dict[str, Any]]]
) -> None:
    for adapter in ADAPTERS:
        response = post(url, {"adapter": adapter, "texts": TEXTS})
        assert response.status_code == 200, response.text
        assert response.json()["adapter"] == adapter
        assert_same_predictions(response.json()["predictions"], expected[adapter])
    assert expected["ner"][2]["words"] == ["Rome", "is", "nice"]  # token tags per word
    assert {p["label"] for p in expected["topics"]} <= set(TOPICS)


def test_concurrent_mixed_adapters_each_get_their_own_answers(
    url: str, service: AdapterService, expected: dict[str, list[dict[str, Any]]]
) -> None:
    rng = random.Random(0)
    requests = []
    for _ in range(32):
        adapter = rng.choice(ADAPTERS)
        rows = rng.sample(range(len(TEXTS)), rng.randint(1, 3))
        requests.append((adapter, rows))

    def ask(request: tuple[str, list[int]]) -> Any:
        adapter, rows = request
        return post(url, {"adapter": adapter, "texts": [TEXTS[i] for i in rows]})

    with ThreadPoolExecutor(32) as pool:
        responses = list(pool.map(ask, requests))
    for (adapter, rows), response in zip(requests, responses, strict=True):
        assert response.status_code == 200, response.text
        assert response.json()["adapter"] == adapter
        assert_same_predictions(
            response.json()["predictions"], [expected[adapter][i] for i in rows]
        )
    assert len(service.pool.names) <= 3  # the LRU cap held under mixed traffic


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"adapter": "../rt-lora", "texts": ["a"]}, 400, "not an adapter name"),
        ({"adapter": "/etc/passwd", "texts": ["a"]}, 400, "never a path"),
        ({"adapter": "rt-lora/../topics", "texts": ["a"]}, 400, "not an adapter name"),
        ({"adapter": "nope", "texts": ["a"]}, 404, "no adapter 'nope' in the registry"),
        ({"adapter": "other-base", "texts": ["a"]}, 404, "fingerprint 0123456789abcdef"),
        ({"adapter": "rt-lora", "texts": []}, 422, "texts is empty"),
        ({"adapter": "rt-lora", "texts": ["ok", "  "]}, 422, "texts[1] is empty"),
        ({"adapter": "rt-lora", "texts": ["a"] * 9}, 413, "9 texts in one request; the limit is 8"),
        ({"adapter": "rt-lora", "texts": ["a" * 201]}, 413, "201 characters; the limit is 200"),
        (
            {"adapter": "rt-lora", "texts": ["a", 1]},
            422,
            "texts[1]: Input should be a valid string",
        ),
        ({"adapter": 5, "texts": ["a"]}, 422, "adapter: Input should be a valid string"),
        ({"adapter": "rt-lora", "texts": "a film"}, 422, "texts: Input should be a valid list"),
        ({"adapter": "rt-lora"}, 422, "texts: Field required"),
        ({"adapter": "rt-lora", "texts": ["a"], "x": 1}, 422, "x: Extra inputs"),
    ],
)
def test_bad_requests_are_refused_naming_the_problem(
    url: str, body: Any, status: int, message: str
) -> None:
    response = post(url, body)
    assert response.status_code == status
    assert message in response.json()["error"]


def test_bad_bodies_are_refused(url: str) -> None:
    headers = {"content-type": "application/json"}
    response = httpx.post(f"{url}/predict", content=b"{not json", headers=headers, timeout=60)
    assert response.status_code == 422 and "JSON" in response.json()["error"]
    huge = json.dumps({"adapter": "rt-lora", "texts": ["a" * 200] * 8 + ["b" * 200_000]})
    response = httpx.post(f"{url}/predict", content=huge.encode(), headers=headers, timeout=60)
    assert response.status_code == 413 and "request body" in response.json()["error"]


def test_adapters_lists_entries_with_their_manifests_and_the_refused(url: str) -> None:
    listing = httpx.get(f"{url}/adapters", timeout=60).json()
    rows = {row["name"]: row for row in listing["adapters"]}
    assert sorted(rows) == sorted(ADAPTERS)
    assert rows["topics"]["labels"] == sorted(TOPICS) and rows["topics"]["method"] == "pfeiffer"
    assert rows["ner"]["task"] == "token" and rows["fusion"]["kind"] == "fusion"
    assert rows["rt-lora"]["bytes"] > 0 and len(rows["rt-lora"]["base_fingerprint"]) == 16
    assert "test" in rows["rt-lora"]["metrics"]
    refused = listing["refused"]
    assert sorted(refused) == ["bad.name", "broken", "link-out", "other-base"]
    assert "not an adapter name" in refused["bad.name"]
    assert "not valid JSON" in refused["broken"]
    assert "links outside the registry" in refused["link-out"]
    assert "fingerprint 0123456789abcdef" in refused["other-base"]
    health = httpx.get(f"{url}/health", timeout=60).json()
    assert health["status"] == "ok" and health["adapters"] == len(ADAPTERS)


def test_metrics_count_requests_latency_and_batches(url: str) -> None:
    assert post(url, {"adapter": "rt-lora", "texts": ["a fun film"]}).status_code == 200
    assert post(url, {"adapter": "nope", "texts": ["a"]}).status_code == 404
    text = httpx.get(f"{url}/metrics", timeout=60).text
    counts = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    assert counts['adaptlab_requests_total{endpoint="/predict",status="200"}'] >= 1
    assert counts['adaptlab_requests_total{endpoint="/predict",status="404"}'] >= 1
    assert counts['adaptlab_request_seconds_count{endpoint="/predict"}'] >= 2
    assert counts["adaptlab_batch_texts_count"] >= 1 and counts["adaptlab_batch_texts_sum"] >= 1
    assert "adaptlab_adapters_loaded" in counts


def test_openapi_docs_are_served(url: str) -> None:
    assert httpx.get(f"{url}/docs", timeout=60).status_code == 200
    schema = httpx.get(f"{url}/openapi.json", timeout=60).json()
    assert {"/predict", "/adapters", "/health", "/admin/reload", "/metrics"} <= set(schema["paths"])


def as_format_1(manifest_path: Path) -> None:
    """Rewrite a manifest as adaptlab 0.1.0 wrote it: no name, kind, composition or members."""
    manifest = json.loads(manifest_path.read_text())
    for key in ("name", "kind", "composition", "members"):
        del manifest[key]
    manifest["format_version"] = 1
    manifest_path.write_text(json.dumps(manifest))


def test_reload_picks_up_new_adapters_and_drops_removed_ones(
    setup: dict[str, Path], tmp_path: Path, expected: dict[str, list[dict[str, Any]]]
) -> None:
    """New folders appear (one a run saved in manifest format 1, as adaptlab 0.1.0 wrote it,
    served like any other), removed ones leave the registry and memory."""
    registry = tmp_path / "registry"
    registry.mkdir()
    shutil.copytree(setup["registry"] / "rt-lora", registry / "rt-lora")
    service = AdapterService(ServeOptions(model=str(setup["model"]), adapters=str(registry)))
    try:
        with running(create_app(service)) as url:
            assert post(url, {"adapter": "rt-lora", "texts": TEXTS}).status_code == 200
            assert post(url, {"adapter": "topics", "texts": TEXTS}).status_code == 404
            shutil.copytree(setup["registry"] / "topics", registry / "topics")
            shutil.copytree(registry / "rt-lora", registry / "old-run")
            as_format_1(registry / "old-run" / "adapter" / "manifest.json")
            shutil.rmtree(registry / "rt-lora")
            reloaded = httpx.post(f"{url}/admin/reload", timeout=60).json()
            assert reloaded == {"adapters": ["old-run", "topics"], "refused": {}}
            response = post(url, {"adapter": "topics", "texts": TEXTS})
            assert response.status_code == 200
            assert_same_predictions(response.json()["predictions"], expected["topics"])
            response = post(url, {"adapter": "old-run", "texts": TEXTS})
            assert response.status_code == 200
            assert_same_predictions(response.json()["predictions"], expected["rt-lora"])
            assert post(url, {"adapter": "rt-lora", "texts": TEXTS}).status_code == 404
            assert service.pool.names == ["topics", "old-run"]
    finally:
        service.close()


def test_the_pool_keeps_the_most_recent_adapters_within_count_and_bytes(
    setup: dict[str, Path],
) -> None:
    service = AdapterService(
        ServeOptions(model=str(setup["model"]), adapters=str(setup["registry"]), max_loaded=2)
    )
    try:
        entries = service.registry.entries
        for name in ("rt-lora", "topics", "rt-lora", "rt-houlsby"):
            service.pool.get(entries[name])
        assert service.pool.names == ["rt-lora", "rt-houlsby"]
        service.pool.max_bytes = entries["rt-houlsby"].bytes + entries["topics"].bytes
        service.pool.get(entries["topics"])
        assert service.pool.names == ["rt-houlsby", "topics"]
        service.pool.drop("topics")
        service.pool.max_bytes = entries["topics"].bytes - 1
        with pytest.raises(AdapterFileError, match="above --max-loaded-mb"):
            service.pool.get(entries["topics"])
        assert service.pool.names == ["rt-houlsby"]
    finally:
        service.close()


def test_adapters_larger_than_the_memory_cap_are_refused(setup: dict[str, Path]) -> None:
    options = ServeOptions(
        model=str(setup["model"]), adapters=str(setup["registry"]), max_loaded_mb=0.001
    )
    service = AdapterService(options)
    try:
        assert not service.registry.entries
        assert "above --max-loaded-mb 0.001" in service.registry.refused["rt-lora"]
    finally:
        service.close()


def test_the_command_line_serves_and_refuses_bad_options(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    for args, message in [
        (["--adapters", str(setup["root"] / "none")], "no such folder"),
        (["--adapters", str(setup["root"] / "reviews.csv")], "is a file; give the folder"),
        (["--adapters", str(setup["registry"]), "--replicas", "2"], "go with --ray"),
        (["--adapters", str(setup["registry"]), "--max-batch", "0"], "--max-batch must be"),
        (["--adapters", str(setup["registry"]), "--max-wait-ms", "-1"], "--max-wait-ms must be"),
        (["--adapters", str(setup["registry"]), "--port", "70000"], "--port must be from 1"),
        (["--adapters", str(setup["registry"]), "--max-length", "100000"], "tokens this model"),
    ]:
        with pytest.raises(SystemExit) as done:
            main(["serve", "--model", str(setup["model"]), *args])
        assert done.value.code == 1
        assert message in capsys.readouterr().err
    port = free_port()
    command = [sys.executable, "-c", "from adaptlab.cli.app import main; main()"]
    server = subprocess.Popen(
        [*command, "serve", "--model", str(setup["model"]), "--adapters", str(setup["registry"])]
        + ["--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                response = httpx.post(
                    f"http://127.0.0.1:{port}/predict",
                    json={"adapter": "topics", "texts": ["the judge"]},
                    timeout=60,
                )
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        assert response.status_code == 200
        assert response.json()["predictions"][0]["label"] in TOPICS
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=60)
    assert "5 adapters on" in output and "refused other-base" in output


def test_every_head_shape_shares_one_copy_of_the_base_weights(service: AdapterService) -> None:
    base = service.base
    models = [
        base.shared_model("single_label", ("fresh", "rotten")),
        base.shared_model("single_label", tuple(sorted(TOPICS))),
        base.shared_model("token", ("O", "B-LOC", "I-LOC")),
        base.new_model("single_label", ("fresh", "rotten")),  # a fusion's own model
    ]
    for name in (
        "bert.embeddings.word_embeddings.weight",
        "bert.encoder.layer.1.output.dense.weight",
    ):
        pointers = {m.get_parameter(name).data_ptr() for m in models}
        assert len(pointers) == 1, name
    heads = {m.get_parameter("classifier.weight").data_ptr() for m in models}
    assert len(heads) == len(models)  # each model has its own head


def test_without_the_serve_extra_the_command_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [m for m in sys.modules if m.startswith("adaptlab.serve")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(adaptlab, "serve")  # restored with the modules after the test
    monkeypatch.setitem(sys.modules, "fastapi", None)  # import fastapi -> ImportError
    with pytest.raises(SystemExit) as done:
        main(["serve", "--model", "minilm-l6", "--adapters", "runs"])
    assert done.value.code == 1
    assert "pip install -c constraints.txt -e '.[serve]'" in capsys.readouterr().err

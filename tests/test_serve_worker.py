"""The model thread: queued requests batch together, grouped by adapter in first-seen order."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("prometheus_client")  # the serve extra

from adaptlab.serve.worker import ModelThread  # noqa: E402
from adaptlab.tasks.prediction import Prediction  # noqa: E402


def test_queued_requests_run_as_one_slice_per_adapter_and_errors_stay_in_their_group() -> None:
    started, release = threading.Event(), threading.Event()
    calls: list[tuple[str, list[str]]] = []
    batches: list[tuple[int, int]] = []

    def run_group(adapter: str, texts: list[str]) -> list[Prediction]:
        started.set()
        release.wait(30)  # the first batch holds the thread while the others queue
        calls.append((adapter, list(texts)))
        if adapter == "broken":
            raise RuntimeError("broken adapter")
        return [Prediction(text, f"{adapter}:{text}", 1.0) for text in texts]

    thread = ModelThread(
        run_group, max_batch=100, max_wait=0.0, observe=lambda *b: batches.append(b)
    )
    first = thread.predict("a", ["0"])
    assert started.wait(30)
    queued = [("b", ["1", "2"]), ("a", ["3"]), ("broken", ["4"]), ("b", ["5"]), ("c", ["6"])]
    futures = [thread.predict(adapter, texts) for adapter, texts in queued]
    reload = thread.call(lambda: len(calls))
    release.set()
    assert [p.label for p in first.result(30)] == ["a:0"]
    for (adapter, texts), future in zip(queued, futures, strict=True):
        if adapter == "broken":
            with pytest.raises(RuntimeError, match="broken adapter"):
                future.result(30)
        else:
            assert [p.label for p in future.result(30)] == [f"{adapter}:{t}" for t in texts]
    assert calls == [
        ("a", ["0"]),
        ("b", ["1", "2", "5"]),
        ("a", ["3"]),
        ("broken", ["4"]),
        ("c", ["6"]),
    ]
    assert batches == [(1, 1), (6, 4)]
    assert reload.result(30) == 5  # the call ran after the batch queued before it
    thread.close()


def test_a_batch_stops_at_max_batch_texts() -> None:
    started, release = threading.Event(), threading.Event()
    sizes: list[int] = []

    def run_group(adapter: str, texts: list[str]) -> list[Prediction]:
        started.set()
        release.wait(30)
        sizes.append(len(texts))
        return [Prediction(text, adapter, 1.0) for text in texts]

    thread = ModelThread(run_group, max_batch=4, max_wait=0.0)
    thread.predict("a", ["x"])
    assert started.wait(30)
    futures = [thread.predict("a", ["x", "y"]) for _ in range(4)]
    release.set()
    for future in futures:
        assert len(future.result(30)) == 2
    thread.close()
    assert sizes == [1, 4, 4]

"""The server's Prometheus metrics, in a registry of its own (several servers, one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class ServeMetrics:
    """Requests by endpoint and status, their latency, batch sizes, adapters in memory."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "adaptlab_requests",
            "HTTP requests answered, by endpoint and status code",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "adaptlab_request_seconds",
            "Time from a request's arrival to its answer, by endpoint",
            ["endpoint"],
            registry=self.registry,
        )
        self.batch_texts = Histogram(
            "adaptlab_batch_texts",
            "Texts in each batch the model thread ran (all adapters together)",
            buckets=_BATCH_BUCKETS,
            registry=self.registry,
        )
        self.batch_adapters = Histogram(
            "adaptlab_batch_adapters",
            "Distinct adapters in each batch the model thread ran",
            buckets=_BATCH_BUCKETS,
            registry=self.registry,
        )
        self.loaded = Gauge(
            "adaptlab_adapters_loaded", "Adapters in memory now", registry=self.registry
        )

    def observe_batch(self, texts: int, adapters: int) -> None:
        self.batch_texts.observe(texts)
        self.batch_adapters.observe(adapters)

    def render(self) -> bytes:
        """Every metric in Prometheus' text exposition format."""
        return generate_latest(self.registry)

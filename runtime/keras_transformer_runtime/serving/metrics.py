"""The server's metrics in Prometheus's text format (`prometheus_client`),
in a registry of the server's own:

* `translation_requests_total{endpoint, code}`: requests answered;
* `translation_sentences_total`: texts translated;
* `translation_batch_size`: sentences per batch the runner ran (histogram);
* `translation_batch_seconds`: seconds per batch (histogram);
* `translation_request_seconds{endpoint}`: a request's latency, from its
  arrival to its answer (histogram);
* `translation_queued_requests`: requests waiting for a worker (gauge).
"""

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def import_prometheus_client():
    """`prometheus_client`, or an `ImportError` that says how to get it."""
    try:
        import prometheus_client
    except ImportError:
        raise ImportError(
            "The server's metrics need prometheus_client, an optional extra of "
            "the runtime: pip install 'keras-transformer-runtime[serve]'."
        ) from None
    return prometheus_client


class Metrics:
    """The server's counters and histograms.

    Args:
        max_batch_size: the batcher's; the batch-size histogram's buckets
            are the powers of two up to it.
        queued: a function that counts the waiting requests.

    Example:

    >>> metrics = Metrics(64, queued=lambda: 0)
    >>> metrics.batch(12, 0.05)
    >>> b"translation_batch_size_count 1.0" in metrics.text()
    True
    """

    content_type = "text/plain; version=0.0.4; charset=utf-8"

    def __init__(self, max_batch_size, queued, workers=lambda: 0):
        prometheus = import_prometheus_client()
        self._prometheus = prometheus
        self.registry = prometheus.CollectorRegistry()
        self.requests = prometheus.Counter(
            "translation_requests",
            "Requests answered, by endpoint and HTTP status code.",
            ["endpoint", "code"],
            registry=self.registry,
        )
        self.sentences = prometheus.Counter(
            "translation_sentences", "Texts translated.", registry=self.registry
        )
        sizes = [2**i for i in range(max_batch_size.bit_length()) if 2**i < max_batch_size]
        self.batch_size = prometheus.Histogram(
            "translation_batch_size",
            "Sentences per batch run.",
            buckets=[*sizes, max_batch_size],
            registry=self.registry,
        )
        self.batch_seconds = prometheus.Histogram(
            "translation_batch_seconds",
            "Seconds per batch run.",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.latency = prometheus.Histogram(
            "translation_request_seconds",
            "Seconds from a request's arrival to its answer, by endpoint.",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        queue = prometheus.Gauge(
            "translation_queued_requests",
            "Requests waiting for a worker.",
            registry=self.registry,
        )
        queue.set_function(queued)
        alive = prometheus.Gauge(
            "translation_workers",
            "Worker threads running (each with a runner): the server's count, unless one died.",
            registry=self.registry,
        )
        alive.set_function(workers)
        self.truncated = prometheus.Counter(
            "translation_truncated_texts",
            "Texts with a sentence over the export's max_input_length, translated in pieces.",
            registry=self.registry,
        )

    def batch(self, size, seconds):
        """Records a batch the runner ran: its sentences and seconds."""
        self.batch_size.observe(size)
        self.batch_seconds.observe(seconds)

    def request(self, endpoint, code, seconds, sentences=0, truncated=0):
        """Records an answered request (`truncated`: its texts translated
        in pieces)."""
        self.requests.labels(endpoint=endpoint, code=str(code)).inc()
        self.latency.labels(endpoint=endpoint).observe(seconds)
        self.sentences.inc(sentences)
        self.truncated.inc(truncated)

    def text(self):
        """Every metric in Prometheus's text format (bytes)."""
        return self._prometheus.generate_latest(self.registry)

"""benchmarks/serving_settings.py: the batcher that stands for TF
Serving's, the clients, and a settings row through the session loader."""

import os
import sys
import threading
import time

import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)

import serving_settings as settings  # noqa: E402

pytestmark = pytest.mark.tensorflow_only  # the session loader is TensorFlow's


class Recorder:
    """A `translate` that upper-cases and records each call's batch."""

    def __init__(self, delay=0.0):
        self.batches, self.delay = [], delay

    def __call__(self, batch):
        self.batches.append(list(batch))
        time.sleep(self.delay)
        return [s.upper() for s in batch]


def test_the_batcher_merges_waiting_requests_and_answers_each_its_own():
    translate = Recorder(delay=0.01)
    batcher = settings.Batcher(translate, max_batch_size=4, batch_timeout_micros=200_000)
    requests = [[f"s{i}"] if i % 3 else [f"s{i}", f"t{i}"] for i in range(12)]
    answers = [None] * len(requests)

    def client(i):
        answers[i] = batcher(requests[i])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert answers == [[s.upper() for s in request] for request in requests]
    # Fewer calls than requests, every sentence translated once, no call
    # over the limit, and a request that did not fit went into the next.
    assert len(translate.batches) < len(requests)
    assert sorted(s for b in translate.batches for s in b) == sorted(s for r in requests for s in r)
    assert max(len(b) for b in translate.batches) == 4


def test_without_a_timeout_the_batcher_takes_only_what_is_waiting():
    translate = Recorder()
    batcher = settings.Batcher(translate, max_batch_size=64, batch_timeout_micros=0)
    for i in range(3):  # one client: nothing else ever waits
        assert batcher([f"s{i}"]) == [f"S{i}"]
    assert translate.batches == [["s0"], ["s1"], ["s2"]]


def test_clients_time_every_request():
    translate = Recorder(delay=0.002)
    sentences = [f"s{i}" for i in range(20)]
    speed, latencies = settings.clients(translate, sentences, 4)
    assert len(latencies) == len(sentences)
    assert all(latency >= 0.002 for latency in latencies)
    assert sorted(s for b in translate.batches for s in b) == sorted(sentences)
    assert 0 < speed <= len(sentences) / 0.002


@pytest.mark.parametrize("flag", ["--count", "--clients"])
def test_counts_below_one_are_usage_errors(flag, capsys):
    with pytest.raises(SystemExit):
        settings.main(["--export_dir", "x", "--sentences", "y", flag, "0"])
    assert f"{flag} must be at least 1, got 0" in capsys.readouterr().err


@pytest.mark.large  # loads a SavedModel through the session loader
def test_a_thread_setting_serves_the_translators_outputs(exported_translator):
    translator, path = exported_translator
    sentences = ["abc", "hello", "", "xyz xyz"]
    translate = settings.load(path, intra=1, inter=1)
    assert translate(sentences) == translator.translate(sentences)
    row = settings.threads_worker(path, sentences, 1, 1)
    assert set(row) == {"batch", "single"} and min(row.values()) > 0


def test_a_request_over_the_batch_size_goes_alone():
    translate = Recorder()
    batcher = settings.Batcher(translate, max_batch_size=2, batch_timeout_micros=0)
    assert batcher(["a", "b", "c"]) == ["A", "B", "C"]
    assert translate.batches == [["a", "b", "c"]]

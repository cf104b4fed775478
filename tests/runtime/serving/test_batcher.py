"""`Batcher`: requests that arrive together run together, within
`max_batch_size`, each getting its own results; a failing request fails
alone."""

import concurrent.futures
import threading
import time

import pytest

from keras_transformer_runtime.serving.batcher import Batcher
from keras_transformer_runtime.serving.batcher import Translation
from tests.runtime.serving.reversing import ReversingRunner


def translations(future):
    return [row[0].translation for row in future.result(timeout=10)]


def test_requests_that_arrive_together_run_as_one_batch():
    runner = ReversingRunner()
    batcher = Batcher([runner], max_batch_size=64, batch_timeout_ms=300)
    texts = [[f"text {i}", f"other {i}"] for i in range(8)]
    futures = [batcher.submit(Translation(), t) for t in texts]
    assert [translations(f) for f in futures] == [[s[::-1] for s in t] for t in texts]
    batcher.close()
    assert runner.calls == [[s for t in texts for s in t]]  # one call, in arrival order


def test_a_batch_holds_at_most_max_batch_size_sentences():
    runner = ReversingRunner(delay=0.01)
    batcher = Batcher([runner], max_batch_size=4, batch_timeout_ms=50)
    futures = [batcher.submit(Translation(), [f"s{i}"]) for i in range(10)]
    assert [translations(f) for f in futures] == [[f"s{i}"[::-1]] for i in range(10)]
    batcher.close()
    assert sorted(s for call in runner.calls for s in call) == sorted(f"s{i}" for i in range(10))
    assert all(len(call) <= 4 for call in runner.calls) and len(runner.calls) >= 3
    # A request of more sentences than a batch holds runs alone, whole.
    batcher = Batcher([runner], max_batch_size=4)
    assert len(translations(batcher.submit(Translation(), ["x"] * 9))) == 9
    batcher.close()


def test_requests_for_different_tasks_are_not_mixed():
    runner = ReversingRunner()
    batcher = Batcher([runner], max_batch_size=64, batch_timeout_ms=200)
    best = batcher.submit(Translation(), ["ab"])
    several = batcher.submit(Translation(n_best=3), ["cd"])
    best_again = batcher.submit(Translation(), ["ef"])
    assert [len(row) for row in several.result(timeout=10)] == [3]
    assert translations(best) == ["ba"] and translations(best_again) == ["fe"]
    batcher.close()
    assert sorted(runner.calls) == [["ab", "ef"], ["cd"]]


def test_a_failing_request_fails_alone():
    runner = ReversingRunner()
    batcher = Batcher([runner], max_batch_size=64, batch_timeout_ms=200)
    good = batcher.submit(Translation(), ["fine"])
    refused = batcher.submit(Translation(), ["REFUSE me"])
    crashed = batcher.submit(Translation(), ["CRASH"])
    also_good = batcher.submit(Translation(), ["also fine"])
    assert translations(good) == ["enif"] and translations(also_good) == ["enif osla"]
    with pytest.raises(ValueError, match="refused: REFUSE me"):
        refused.result(timeout=10)
    with pytest.raises(RuntimeError, match="crashed"):
        crashed.result(timeout=10)
    # The worker kept running.
    assert translations(batcher.submit(Translation(), ["after"])) == ["retfa"]
    batcher.close()


def test_a_lone_request_waits_at_most_the_timeout():
    batcher = Batcher([ReversingRunner()], max_batch_size=64, batch_timeout_ms=50)
    start = time.perf_counter()
    assert translations(batcher.submit(Translation(), ["alone"])) == ["enola"]
    assert time.perf_counter() - start < 2.0  # 50 ms, with room for a loaded machine
    batcher.close()


def test_a_batch_stops_waiting_once_requests_stop_coming():
    """Requests that came together run once a quarter of the timeout
    passes without another: not after the whole timeout."""
    runner = ReversingRunner()
    batcher = Batcher([runner], max_batch_size=64, batch_timeout_ms=2000)
    start = time.perf_counter()
    futures = [batcher.submit(Translation(), [s]) for s in ("ab", "cd", "ef")]
    assert [translations(f) for f in futures] == [["ba"], ["dc"], ["fe"]]
    assert time.perf_counter() - start < 1.5  # 0.5 s of lull, not the 2 s timeout
    batcher.close()
    assert runner.calls == [["ab", "cd", "ef"]]


def test_a_full_batch_does_not_wait_for_the_timeout():
    batcher = Batcher([ReversingRunner()], max_batch_size=2, batch_timeout_ms=60_000)
    futures = [batcher.submit(Translation(), [s]) for s in ("ab", "cd")]
    assert [translations(f) for f in futures] == [["ba"], ["dc"]]  # within the 10 s wait
    batcher.close()


def test_workers_run_batches_side_by_side():
    """Two workers, each with its own runner, run two batches at once: a
    second batch does not wait for the first to finish."""
    runners = [ReversingRunner(delay=0.5), ReversingRunner(delay=0.5)]
    batcher = Batcher(runners, max_batch_size=1, batch_timeout_ms=0)
    start = time.perf_counter()
    futures = [batcher.submit(Translation(), [s]) for s in ("ab", "cd")]
    assert [translations(f) for f in futures] == [["ba"], ["dc"]]
    assert time.perf_counter() - start < 0.95
    batcher.close()
    assert [len(r.calls) for r in runners] == [1, 1]


def test_idle_workers_share_the_waiting_sentences():
    """Eight sentences waiting and two idle workers: a batch of four each,
    run side by side, not eight on one worker while the other waits."""
    runners = [ReversingRunner(delay=0.4), ReversingRunner(delay=0.4)]
    batcher = Batcher(runners, max_batch_size=64, batch_timeout_ms=100)
    start = time.perf_counter()
    futures = [batcher.submit(Translation(), [f"s{i}"]) for i in range(8)]
    assert [translations(f) for f in futures] == [[f"s{i}"[::-1]] for i in range(8)]
    assert time.perf_counter() - start < 0.75  # one batch time (0.4 s) and the timeout
    batcher.close()
    assert sorted(len(call) for r in runners for call in r.calls) == [4, 4]


def test_close_answers_the_queued_requests_and_refuses_new_ones():
    batcher = Batcher([ReversingRunner(delay=0.05)], max_batch_size=1, batch_timeout_ms=0)
    futures = [batcher.submit(Translation(), [f"q{i}"]) for i in range(5)]
    batcher.close()
    assert all(f.done() for f in futures)
    assert [translations(f) for f in futures] == [[f"q{i}"[::-1]] for i in range(5)]
    with pytest.raises(RuntimeError, match="closed"):
        batcher.submit(Translation(), ["late"])


def test_concurrent_clients_get_their_own_results():
    batcher = Batcher([ReversingRunner(), ReversingRunner()], max_batch_size=8, batch_timeout_ms=2)

    def client(number):
        results = []
        for i in range(20):
            text = f"client {number} sentence {i}"
            results.append(translations(batcher.submit(Translation(), [text]))[0] == text[::-1])
        return all(results)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert all(pool.map(client, range(8)))
    batcher.close()


def test_on_batch_sees_every_batch():
    seen = []
    lock = threading.Lock()

    def on_batch(size, seconds):
        with lock:
            seen.append((size, seconds))

    batcher = Batcher(
        [ReversingRunner()], max_batch_size=3, batch_timeout_ms=100, on_batch=on_batch
    )
    futures = [batcher.submit(Translation(), ["a", "b"]) for _ in range(3)]
    for f in futures:
        f.result(timeout=10)
    batcher.close()
    assert sum(size for size, _ in seen) == 6 and all(s >= 0 for _, s in seen)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(runners=[]), "`runners` must hold at least one runner"),
        (dict(max_batch_size=0), "`max_batch_size` must be a positive integer"),
        (dict(batch_timeout_ms=-1), "`batch_timeout_ms` must be a non-negative number"),
    ],
)
def test_bad_arguments_are_named(arguments, message):
    arguments = {"runners": [ReversingRunner()], **arguments}
    with pytest.raises(ValueError, match=message):
        Batcher(**arguments)


def test_cancelled_requests_neither_kill_a_worker_nor_hold_up_the_others():
    """A client gone while its request waits cancels its future; setting
    its result raised in the worker, which died, and the requests of its
    batch and every later one for it hung."""
    runners = [ReversingRunner(delay=0.05), ReversingRunner(delay=0.05)]
    batcher = Batcher(runners, max_batch_size=2, batch_timeout_ms=1)
    for round_ in range(3):
        futures = [batcher.submit(Translation(), [f"r{round_} s{i}"]) for i in range(12)]
        cancelled = [f for i, f in enumerate(futures) if i % 3 == 2 and f.cancel()]
        assert cancelled  # some were still waiting
        for i, future in enumerate(futures):
            if future not in cancelled:
                assert translations(future) == [f"r{round_} s{i}"[::-1]]
    # Both workers still take batches: two slow requests run side by side.
    for runner in runners:
        runner.calls.clear()
    start = time.perf_counter()
    pair = [batcher.submit(Translation(), [f"x{i}"]) for i in range(4)]
    assert [translations(f) for f in pair] == [[f"x{i}"[::-1]] for i in range(4)]
    assert all(runner.calls for runner in runners)
    assert time.perf_counter() - start < 4 * 0.05 + 0.5
    batcher.close()

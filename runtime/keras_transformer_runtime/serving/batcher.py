"""Dynamic batching: requests that arrive together are translated together.

A request (`Batcher.submit`) is queued; a worker thread takes the oldest
one and, with it, the later requests that ask for the same thing
(`Translation`), until the batch holds `max_batch_size` sentences, the
oldest has waited `batch_timeout_ms`, or no request has come for a
quarter of it (the requests that came together are in), then runs the
batch on its own runner, which sorts the batch's sentences by length
into batches of at most `max_batch_size`. One worker forms a batch at a time (as TF Serving's
batching threads do); several run at once, each with its own runner. A
batch takes its share of the waiting sentences among the idle workers
(8 waiting, 2 idle workers: 4), so that the cores translate side by side
rather than one batch after another.

A batch that fails is run again request by request, so that a request
the runner refuses fails alone and the others get their translations.
"""

import concurrent.futures
import dataclasses
import threading
import time

from keras_transformer_runtime import validation

# A batch stops waiting once no request has come for this part of the
# timeout: those that were coming together have come.
LULL_FRACTION = 0.25


@dataclasses.dataclass(frozen=True)
class Translation:
    """What a request asks the runner for: `translate_with_scores` with
    `n_best` and `token_scores`. Requests that ask for the same thing are
    batched together."""

    n_best: int = 1
    token_scores: bool = False

    def run(self, runner, sentences, batch_size):
        """The runner's `Hypothesis` lists for `sentences`, one per sentence."""
        return runner.translate_with_scores(
            sentences, n_best=self.n_best, token_scores=self.token_scores, batch_size=batch_size
        )


@dataclasses.dataclass(frozen=True)
class Documents:
    """A request for web pages or Markdown: `translate_documents` in
    `format`, each item a `(document, target_lang)` pair (`with_languages`:
    whether they name a language; the requests of a batch all do or all
    don't)."""

    format: str
    with_languages: bool = False

    def run(self, runner, items, batch_size):
        """The runner's `TranslatedDocument`s for `items`, one per item."""
        texts = [text for text, _ in items]
        langs = [lang for _, lang in items] if self.with_languages else None
        return runner.translate_documents(texts, self.format, batch_size, langs)


@dataclasses.dataclass
class _Request:
    task: Translation
    sentences: list
    arrived: float
    future: concurrent.futures.Future


class Batcher:
    """Runs `Translation` requests in batches on worker threads, one runner
    each.

    Args:
        runners: one runner per worker thread (`keras_transformer_runtime.
            Runner`s; a runner is only ever used by its own thread).
        max_batch_size: the most sentences in a batch (a request of more
            runs alone).
        batch_timeout_ms: how long the oldest waiting request waits for
            others to fill its batch.
        on_batch: called after each batch with its number of sentences
            and the seconds it ran (e.g. to record metrics).

    Example:

    >>> batcher = Batcher([LiteRTTranslator("ende.tflite")], max_batch_size=64)
    >>> batcher.submit(Translation(), ["A dog runs."]).result()[0][0].translation
    'Ein Hund läuft.'
    >>> batcher.close()
    """

    def __init__(self, runners, max_batch_size=64, batch_timeout_ms=5.0, on_batch=None):
        runners = list(runners)
        if not runners:
            raise ValueError("`runners` must hold at least one runner. Received: runners=[]")
        validation.check_positive_int(max_batch_size=max_batch_size)
        validation.check_non_negative(batch_timeout_ms=batch_timeout_ms)
        self.max_batch_size = max_batch_size
        self.batch_timeout = batch_timeout_ms / 1000
        self._on_batch = on_batch
        self._queue = []
        self._changed = threading.Condition()
        self._forming = threading.Lock()
        self._closed = False
        self._idle = len(runners)  # workers not running a batch
        self._threads = [
            threading.Thread(target=self._work, args=(r,), name=f"batcher-{i}", daemon=True)
            for i, r in enumerate(runners)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, task, sentences):
        """Queues `sentences` (a list of texts) for `task`; a
        `concurrent.futures.Future` of their results (what the runner
        returns for them, in order, or its exception)."""
        future = concurrent.futures.Future()
        with self._changed:
            if self._closed:
                raise RuntimeError("The batcher is closed.")
            self._queue.append(_Request(task, list(sentences), time.monotonic(), future))
            self._changed.notify_all()
        return future

    def queued(self):
        """How many requests wait for a worker."""
        with self._changed:
            return len(self._queue)

    def running_workers(self):
        """How many worker threads run (all of them, unless closed)."""
        return sum(thread.is_alive() for thread in self._threads)

    def close(self):
        """Stops the workers once the queued requests are done."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        for thread in self._threads:
            thread.join()

    def _work(self, runner):
        while True:
            with self._forming:
                batch = self._next_batch()
            if batch is None:
                return
            try:
                self._run(runner, batch)
            except Exception as error:  # noqa: BLE001 (the batch's requests get it; the worker lives)
                for request in batch:
                    if not request.future.done():
                        request.future.set_exception(error)
            finally:
                with self._changed:
                    self._idle += 1

    def _next_batch(self):
        """The next batch of requests (`None` once closed and empty): the
        oldest request and those after it with the same task, up to this
        worker's share of them (`max_batch_size` at most), once full, once
        the oldest has waited `batch_timeout`, or once none has come for
        `LULL_FRACTION` of it."""
        with self._changed:
            while not self._queue:
                if self._closed:
                    return None
                self._changed.wait()
            first = self._queue[0]
            deadline = first.arrived + self.batch_timeout
            while not self._closed:
                now = time.monotonic()
                lull = now - self._queue[-1].arrived >= self.batch_timeout * LULL_FRACTION
                if now >= deadline or lull or self._fill(first.task) >= self.max_batch_size:
                    break
                self._changed.wait(min(deadline - now, self.batch_timeout * LULL_FRACTION))
            share = -(-self._fill(first.task) // self._idle)  # rounded up
            self._idle -= 1
            return self._take(first.task, min(share, self.max_batch_size))

    def _fill(self, task):
        """How many sentences the queued requests for `task` hold."""
        return sum(len(r.sentences) for r in self._queue if r.task == task)

    def _take(self, task, size_limit):
        """Removes from the queue the oldest requests for `task` that fit
        in a batch of `size_limit` sentences (at least one), and returns
        them, less those whose client cancelled them (gone before their
        turn: their futures are cancelled, and the others' can no longer
        be)."""
        taken, kept, size = [], [], 0
        for request in self._queue:
            fits = not taken or size + len(request.sentences) <= size_limit
            if request.task == task and fits and size < size_limit:
                taken.append(request)
                size += len(request.sentences)
            else:
                kept.append(request)
        self._queue = kept
        return [request for request in taken if request.future.set_running_or_notify_cancel()]

    def _run(self, runner, batch):
        """Runs `batch` (requests for one task) as one call; if it fails,
        each request alone, so that the failure is its request's. A batch
        whose requests were all cancelled runs nothing."""
        if not batch:
            return
        task = batch[0].task
        sentences = [s for request in batch for s in request.sentences]
        start = time.perf_counter()
        try:
            results = task.run(runner, sentences, self.max_batch_size)
        except Exception as error:  # noqa: BLE001 (given to the request it belongs to)
            if len(batch) == 1:
                batch[0].future.set_exception(error)
            else:
                for request in batch:
                    self._run(runner, [request])
            return
        if self._on_batch is not None:
            self._on_batch(len(sentences), time.perf_counter() - start)
        offset = 0
        for request in batch:
            request.future.set_result(results[offset : offset + len(request.sentences)])
            offset += len(request.sentences)

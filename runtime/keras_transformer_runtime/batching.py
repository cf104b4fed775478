"""Running a translator over many sentences in batches of similar length."""

import concurrent.futures
import sys
import time

from keras_transformer_runtime import validation


def length_batches(count, size, batch_size):
    """The indices `range(count)` sorted by `size(i)` and cut into batches
    of at most `batch_size`, so that a batch pads little.

    Example:

    >>> texts = ["a b c", "a", "a b"]
    >>> length_batches(3, lambda i: len(texts[i]), 2)
    [[1, 2], [0]]
    """
    validation.check_positive_int(batch_size=batch_size)
    order = sorted(range(count), key=size)
    return [order[start : start + batch_size] for start in range(0, count, batch_size)]


def in_length_order(count, size, run, batch_size, progress=None, parallel=1):
    """`run(indices)` over `range(count)` in batches of at most
    `batch_size` items of similar `size(i)` (sorted by it, so that a batch
    pads little), its results, one per index, put back in index order.

    With `parallel` above 1, that many batches run at once, each `run` on a
    thread of its own (for a `run` that releases the GIL and runs calls
    side by side, as CTranslate2's `inter_threads` translators do).

    With `progress` (a label), a line on stderr counts the items done and
    the seconds spent, updated after each batch.

    Example:

    >>> texts = ["a b c", "a", "a b"]
    >>> in_length_order(3, lambda i: len(texts[i]), lambda c: [texts[i].upper() for i in c], 2)
    ['A B C', 'A', 'A B']
    """
    validation.check_positive_int(parallel=parallel)
    chunks = length_batches(count, size, batch_size)
    results = [None] * count
    done = 0
    start_time = time.time()
    parallel = min(parallel, len(chunks))  # no threads for one batch (a server's call)
    with concurrent.futures.ThreadPoolExecutor(parallel) if parallel > 1 else _InOrder() as pool:
        for chunk, outputs in zip(chunks, pool.map(run, chunks), strict=True):
            for i, result in zip(chunk, outputs, strict=True):
                results[i] = result
            done += len(chunk)
            if progress:
                print(
                    f"\r{progress}: {done}/{count} sentences, {time.time() - start_time:.0f}s",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
    if progress:
        print(file=sys.stderr)
    return results


class _InOrder:
    """An executor's `map` that runs each call in turn, on this thread."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @staticmethod
    def map(function, items):
        return map(function, items)

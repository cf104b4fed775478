"""What TF Serving's settings do to an exported translator, through the
TF1 session loader that its C++ server runs.

    python benchmarks/serving_settings.py --export_dir exports/multi30k \\
        --sentences data/multi30k/test_2016_flickr.en.gz

Two tables, on the sentences of `--sentences` (the first `--count`):

* **Threads**: the session's `ConfigProto` as TF Serving builds it from
  `--tensorflow_intra_op_parallelism` and `--tensorflow_inter_op_parallelism`
  (0: one thread per core), each setting loaded in a process of its own:
  sentences/s on batches of 64 (the fastest of two passes) and one
  sentence at a time (the first `--single`, the fastest of three).
* **Batching**: `--clients` clients, each sending one sentence at a time
  and waiting for its answer, served either as they come (the session
  runs the requests side by side, as TF Serving does without
  `--enable_batching`) or through a batcher that, like TF Serving's with
  `--enable_batching`, merges the waiting requests into one session call
  of at most `max_batch_size` sentences, waiting at most
  `batch_timeout_micros` for a batch to fill, with TF Serving's default
  threads and with 1 intra-op and 2 inter-op threads: sentences/s and the
  median and 90th-percentile latency of a request.

`--tables threads` or `--tables batching` prints one of them.

Every speed is measured after a warm-up call.
"""

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from keras_transformer_runtime.text.files import read_lines  # noqa: E402

THREADS = ((0, 0), (1, 1), (2, 1), (1, 2), (2, 2))
# (batching parameters or None for none, (intra_op, inter_op) threads)
BATCHING = (
    (None, (0, 0)),
    (None, (1, 2)),
    ({"max_batch_size": 64, "batch_timeout_micros": 0}, (0, 0)),
    ({"max_batch_size": 64, "batch_timeout_micros": 5_000}, (0, 0)),
    ({"max_batch_size": 64, "batch_timeout_micros": 20_000}, (0, 0)),
    ({"max_batch_size": 64, "batch_timeout_micros": 5_000}, (1, 2)),
)


def load(path, intra=0, inter=0):
    """`translate(list of str) -> list of str` through `serving_default`,
    loaded by the TF1 session loader with these thread settings."""
    import numpy as np
    import tensorflow_text  # noqa: F401 (registers the SentencePiece ops the graph holds)

    from comparison.served import SessionSignature
    from comparison.served import session_config

    config = session_config()
    config.intra_op_parallelism_threads, config.inter_op_parallelism_threads = intra, inter
    serve = SessionSignature(path, config=config)

    def translate(batch):
        outputs = serve(text=np.array(batch, dtype=object))["translation"]
        return [t.decode("utf-8") for t in outputs]

    return translate


def best_speed(run, sentences, passes=2):
    """Sentences per second of `run()` over `sentences`, the fastest of
    `passes` passes."""
    speeds = []
    for _ in range(passes):
        start = time.perf_counter()
        run()
        speeds.append(len(sentences) / (time.perf_counter() - start))
    return max(speeds)


def threads_worker(path, sentences, intra, inter, single=100):
    """One `THREADS` row: `{"batch": sentences/s, "single": sentences/s}`."""
    translate = load(path, intra, inter)
    translate(sentences[:64])

    def batches():
        for i in range(0, len(sentences), 64):
            translate(sentences[i : i + 64])

    singles = sentences[:single]
    return {
        "batch": best_speed(batches, sentences),
        "single": best_speed(lambda: [translate([s]) for s in singles], singles, passes=3),
    }


class Batcher:
    """Merges the requests waiting in a queue into one call of `translate`
    of at most `max_batch_size` sentences, waiting up to
    `batch_timeout_micros` for more after the first, as TF Serving's
    batching does (one batching thread; a request that does not fit in
    the batch opens the next one; one larger than `max_batch_size` goes
    alone)."""

    def __init__(self, translate, max_batch_size, batch_timeout_micros):
        self.translate, self.size = translate, max_batch_size
        self.timeout = batch_timeout_micros / 1e6
        self.requests = queue.Queue()
        threading.Thread(target=self._serve, daemon=True).start()

    def __call__(self, batch):
        done, answer = threading.Event(), []
        self.requests.put((batch, done, answer))
        done.wait()
        return answer[0]

    def _serve(self):
        next_request = None
        while True:
            waiting = [next_request or self.requests.get()]
            next_request = None
            sentences = len(waiting[0][0])
            deadline = time.perf_counter() + self.timeout
            while sentences < self.size:
                try:
                    request = self.requests.get(timeout=max(0, deadline - time.perf_counter()))
                except queue.Empty:
                    break
                if sentences + len(request[0]) > self.size:
                    next_request = request
                    break
                waiting.append(request)
                sentences += len(request[0])
            outputs = self.translate([s for batch, _, _ in waiting for s in batch])
            for batch, done, answer in waiting:
                answer.append(outputs[: len(batch)])
                outputs = outputs[len(batch) :]
                done.set()


def clients(serve, sentences, count):
    """`count` clients sending `sentences` one at a time, each waiting for
    its answer: `(sentences/s, latencies in seconds)`."""
    latencies = []
    share = [sentences[i::count] for i in range(count)]

    def client(mine):
        for sentence in mine:
            start = time.perf_counter()
            serve([sentence])
            latencies.append(time.perf_counter() - start)

    threads = [threading.Thread(target=client, args=(mine,)) for mine in share]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(sentences) / (time.perf_counter() - start), latencies


def batching_worker(path, sentences, count, setting, intra=0, inter=0):
    """One batching row (`setting` the batching parameters of a `BATCHING`
    entry, or None for none; `intra`, `inter` its threads): `{"speed",
    "p50", "p90"}` of `count` clients, the faster of two passes."""
    translate = load(path, intra, inter)
    translate(sentences[:count])
    serve = translate if setting is None else Batcher(translate, **setting)
    best = None
    for _ in range(2):
        speed, latencies = clients(serve, sentences, count)
        if best is None or speed > best[0]:
            best = (speed, latencies)
    speed, latencies = best
    cuts = statistics.quantiles(latencies, n=10)
    return {"speed": speed, "p50": statistics.median(latencies), "p90": cuts[-1]}


def in_process(kind, args, **extra):
    """A worker in a fresh process (each setting alone on the cores)."""
    command = [sys.executable, os.path.abspath(__file__), "--worker", kind]
    command += ["--export_dir", args.export_dir, "--sentences", args.sentences]
    command += ["--count", str(args.count), "--clients", str(args.clients)]
    command += ["--single", str(args.single)]
    command += ["--setting", json.dumps(extra)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--export_dir", required=True)
    parser.add_argument("--sentences", required=True, help="a text file, one sentence a line")
    parser.add_argument("--count", type=int, default=512, help="sentences to translate")
    parser.add_argument("--clients", type=int, default=8, help="clients sending at once")
    parser.add_argument("--single", type=int, default=100, help="sentences sent one at a time")
    parser.add_argument(
        "--tables", nargs="+", choices=("threads", "batching"), default=["threads", "batching"]
    )
    parser.add_argument("--worker", choices=("threads", "batching"), help=argparse.SUPPRESS)
    parser.add_argument("--setting", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("count", "clients", "single"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    from keras_transformer.export import resolve_version_dir

    path = resolve_version_dir(args.export_dir)
    sentences = read_lines(args.sentences)[: args.count]
    if args.worker:
        setting = json.loads(args.setting)
        if args.worker == "threads":
            result = threads_worker(
                path, sentences, setting["intra"], setting["inter"], args.single
            )
        else:
            result = batching_worker(
                path, sentences, args.clients, setting["batching"], *setting["threads"]
            )
        print(json.dumps(result))
        return

    print(f"{path}, {len(sentences)} sentences, {os.cpu_count()} cores")
    if "threads" in args.tables:
        print_threads(args)
    if "batching" in args.tables:
        print_batching(args)


def print_threads(args):
    print()
    print("| intra_op threads | inter_op threads | sentences/s, batches of 64 | one at a time |")
    print("| ---: | ---: | ---: | ---: |")
    for intra, inter in THREADS:
        row = in_process("threads", args, intra=intra, inter=inter)
        print(
            f"| {thread_name(intra)} | {thread_name(inter)} "
            f"| {row['batch']:.1f} | {row['single']:.1f} |",
            flush=True,
        )


def print_batching(args):
    print()
    print(f"{args.clients} clients, each sending one sentence at a time:")
    print()
    print("| batching | intra_op, inter_op threads | sentences/s | latency p50, ms | p90, ms |")
    print("| --- | --- | ---: | ---: | ---: |")
    for setting, threads in BATCHING:
        row = in_process("batching", args, batching=setting, threads=threads)
        name = (
            "none"
            if setting is None
            else f"max_batch_size {setting['max_batch_size']}, "
            f"batch_timeout_micros {setting['batch_timeout_micros']:,}"
        )
        print(
            f"| {name} | {thread_name(threads[0])}, {thread_name(threads[1])} "
            f"| {row['speed']:.1f} | {1000 * row['p50']:.0f} | {1000 * row['p90']:.0f} |",
            flush=True,
        )


def thread_name(count):
    return "0 (one per core)" if count == 0 else str(count)


if __name__ == "__main__":
    main()

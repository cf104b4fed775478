"""The HTTP server (`python -m keras_transformer_runtime.serve`) under
concurrent clients, against its runner called directly.

    python benchmarks/server.py --model exports/multi30k.tflite \\
        --sentences data/multi30k/test_2016_flickr.en.gz --count 1000 --clients 8

`--clients` clients each send one sentence a request over a kept-alive
HTTP connection (TF Serving's `:predict`, `serving_default`) and wait for
the answer, the sentences of `--sentences` (the first `--count`) shared
among them. A row per `--settings` entry (workers x threads per runner;
default `SETTINGS`):
the server started with it (`--max_batch_size`, `--batch_timeout_ms`)
in a process of its own, and the same runners called directly in
another process, each worker thread translating consecutive batches of
the server's mean batch size (read from its `/metrics`), without HTTP,
JSON or queueing: `server / direct` is what serving costs. The two
alternate, `--rounds` times after a warm-up (so that the machine's drift
falls on both alike); a row gives the medians of the rounds' speeds and
of their ratios, a request's median and 90th-percentile latency
over all rounds, and how busy the workers were (the seconds they ran
batches, from `/metrics`, over the workers' share of the pass: the rest
they waited for requests, e.g. for the clients of the batch just
answered to send their next).

For a CTranslate2 export, each round also measures CTranslate2 alone at
its best on the same batch size: every sentence in one `translate_batch`
call with `max_batch_size` the server's mean batch, over its
`(inter_threads, intra_threads)` grid (`comparison.peer_ctranslate2`),
each setting in a process of its own, the fastest kept and printed; and
the direct pass with one translator per worker (`separate`), against the
one translator the workers share (`inter_threads` = workers, what the
server runs).
"""

import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from serving_settings import clients  # noqa: E402

from keras_transformer_runtime.runners.loading import load_runner  # noqa: E402
from keras_transformer_runtime.runners.loading import runner_kind  # noqa: E402
from keras_transformer_runtime.serve import load_runners  # noqa: E402
from keras_transformer_runtime.text.files import read_lines  # noqa: E402

# (workers, threads per runner: None for the cores shared among them)
SETTINGS = ((1, None), (2, 1))


def setting(text):
    """`"2x1"` as `(2, 1)` (workers x threads); `"1xall"` as `(1, None)`."""
    workers, _, threads = text.partition("x")
    try:
        return int(workers), None if threads == "all" else int(threads)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a setting is WORKERSxTHREADS, e.g. 2x1 or 1xall, not {text!r}"
        ) from None


def direct_speed(model, sentences, batch_size, workers=1, threads=None, passes=1, separate=False):
    """Sentences/s of the runners the server would load (`workers`, each
    with `threads`; with `separate`, one each even where the server shares
    one), called directly: each worker thread translates the next
    `batch_size` consecutive sentences until none are left."""
    if separate:
        threads = threads or max(1, (os.cpu_count() or 1) // workers)
        runners = [load_runner(model, threads) for _ in range(workers)]
    else:
        runners = load_runners(model, workers, threads)
    for runner in runners:
        runner.translate(sentences[:batch_size], batch_size=batch_size)
    starts = list(range(0, len(sentences), batch_size))
    lock = threading.Lock()

    def work(runner, pending):
        while True:
            with lock:
                start = next(pending, None)
            if start is None:
                return
            runner.translate(sentences[start : start + batch_size], batch_size=batch_size)

    speeds = []
    for _ in range(passes):
        pending = iter(starts)
        pool = [threading.Thread(target=work, args=(runner, pending)) for runner in runners]
        begin = time.perf_counter()
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        speeds.append(len(sentences) / (time.perf_counter() - begin))
    return max(speeds)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client:
    """One kept-alive connection to the server's `:predict`, light on the
    cores the server shares: the request written whole, the answer read by
    its `Content-Length`, without `http.client`'s header parsing (the
    clients run on the cores the server is measured on)."""

    def __init__(self, port):
        self.port = port
        self.socket = None
        self.buffer = b""

    def translate(self, sentences):
        if self.socket is None:
            self.socket = socket.create_connection(("127.0.0.1", self.port), timeout=120)
            self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        body = json.dumps({"instances": sentences}).encode()
        head = (
            "POST /v1/models/bench:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.socket.sendall(head.encode() + body)
        head, body = self._response()
        answer = json.loads(body)
        if not head.startswith(b"HTTP/1.1 200 "):
            raise RuntimeError(answer)
        return [p["translation"] for p in answer["predictions"]]

    def _response(self):
        """The next response's status line and headers, and its body."""
        while b"\r\n\r\n" not in self.buffer:
            self._receive()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?im)^content-length:\s*(\d+)", head)[1])
        while len(self.buffer) < length:
            self._receive()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return head, body

    def _receive(self):
        data = self.socket.recv(1 << 16)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.buffer += data

    def close(self):
        if self.socket is not None:
            self.socket.close()


def clients_pass(port, sentences, count):
    """`count` clients sending `sentences` one at a time, each on its own
    kept-alive connection (`serving_settings.clients`): `(sentences/s,
    latencies in seconds)`."""
    connections, lock = {}, threading.Lock()

    def serve(batch):
        with lock:
            client = connections.get(threading.get_ident())
            if client is None:
                client = connections[threading.get_ident()] = Client(port)
        return client.translate(batch)

    try:
        return clients(serve, sentences, count)
    finally:
        for client in connections.values():
            client.close()


def wait_until_serving(server, port, sentences, timeout=300):
    """Returns once the `server` process on `port` translates `sentences`."""
    deadline = time.time() + timeout
    while True:
        client = Client(port)
        try:
            client.translate(sentences)
            return
        except OSError:
            if server.poll() is not None or time.time() > deadline:
                raise SystemExit(f"the server on port {port} did not start") from None
            time.sleep(0.2)
        finally:
            client.close()


def batch_totals(port):
    """`(batches, sentences, seconds)` the server on `port` has run
    (`/metrics`: the batches' count, their sentences, the seconds its
    workers spent running them)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    samples = {}
    for line in text.splitlines():
        if line.startswith(("translation_batch_size_", "translation_batch_seconds_")):
            name, value = line.split()
            samples[name] = float(value)
    return (
        samples["translation_batch_size_count"],
        samples["translation_batch_size_sum"],
        samples["translation_batch_seconds_sum"],
    )


def direct_in_process(argv, workers, threads, batch_size, separate=False):
    """Sentences/s of `direct_speed` in a process of its own (the cores to
    itself, as the server had them)."""
    command = [sys.executable, os.path.abspath(__file__), *argv]
    command += ["--direct", str(workers), str(threads or 0), str(batch_size)]
    command += ["--separate"] if separate else []
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def alone_at_best(argv, batch_size):
    """`(sentences/s, setting)` of CTranslate2 alone at its best on batches
    of `batch_size`: each `(inter, intra)` of its grid in a process of its
    own, the fastest kept."""
    from comparison.peer_ctranslate2 import setting_name
    from comparison.peer_ctranslate2 import thread_grid

    best = (0.0, None)
    for inter, intra in thread_grid():
        command = [sys.executable, os.path.abspath(__file__), *argv]
        command += ["--alone", str(inter), str(intra), str(batch_size)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        rate = json.loads(done.stdout.strip().splitlines()[-1])
        if rate > best[0]:
            best = (rate, setting_name(inter, intra, ("examples", batch_size)))
    return best


def alone_speed(model, sentences, inter, intra, batch_size):
    """Sentences/s of CTranslate2 alone with these threads, every sentence
    in one call, batches of `batch_size` (`translate_at_best`)."""
    from comparison.peer_ctranslate2 import translate_at_best

    settings = load_runner(model, 1).settings
    result = translate_at_best(
        model, "default", inter, intra, sentences, settings.beam_size, settings.alpha, 0,
        batchings=(("examples", batch_size),),
    )  # fmt: skip
    return result["batch"]


def row(args, argv, sentences, workers, threads):
    """`{"speed", "direct", "ratio", "p50", "p90", "batch", "busy"}` of the
    clients against a server started with `workers` and `threads`:
    `--rounds` rounds, each a pass of the clients and then a pass of the
    runners called directly on batches of that pass's mean size (`batch`:
    the mean over the rounds), the medians of the rounds (`ratio`: of each round's
    server / direct, the two measured a minute apart at most; `busy`: the
    workers' seconds running batches over theirs in the pass)."""
    port = free_port()
    command = [sys.executable, "-m", "keras_transformer_runtime.serve", "--model", args.model]
    command += ["--model_name", "bench", "--port", str(port), "--workers", str(workers)]
    command += ["--max_batch_size", str(args.max_batch_size)]
    command += ["--batch_timeout_ms", str(args.batch_timeout_ms)]
    command += ["--threads", str(threads)] if threads else []
    server = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.DEVNULL)
    rounds, latencies = [], []
    try:
        wait_until_serving(server, port, sentences[:1])
        clients_pass(port, sentences[: 4 * args.clients], args.clients)  # warm-up
        for _ in range(args.rounds):
            before = batch_totals(port)
            speed, pass_latencies = clients_pass(port, sentences, args.clients)
            after = batch_totals(port)
            batch = (after[1] - before[1]) / (after[0] - before[0])
            busy = (after[2] - before[2]) / (workers * len(sentences) / speed)
            size = max(1, round(batch))
            direct = direct_in_process(argv, workers, threads, size)
            measured = {"speed": speed, "direct": direct, "batch": batch, "busy": busy}
            if runner_kind(args.model) == "ctranslate2":
                measured["alone"], measured["alone_setting"] = alone_at_best(argv, size)
                if workers > 1:
                    measured["separate"] = direct_in_process(argv, workers, threads, size, True)
            rounds.append(measured)
            latencies += pass_latencies
    finally:
        server.terminate()
        server.wait()
    result = {
        "speed": statistics.median(r["speed"] for r in rounds),
        "direct": statistics.median(r["direct"] for r in rounds),
        "ratio": statistics.median(r["speed"] / r["direct"] for r in rounds),
        "batch": statistics.mean(r["batch"] for r in rounds),
        "busy": statistics.median(r["busy"] for r in rounds),
        "p50": statistics.median(latencies),
        "p90": statistics.quantiles(latencies, n=10)[-1],
    }
    if "alone" in rounds[0]:
        result["alone"] = statistics.median(r["alone"] for r in rounds)
        result["alone_ratio"] = statistics.median(r["speed"] / r["alone"] for r in rounds)
        result["alone_setting"] = rounds[-1]["alone_setting"]
    if "separate" in rounds[0]:
        result["separate"] = statistics.median(r["separate"] for r in rounds)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True, help="an export the server runs")
    parser.add_argument("--sentences", required=True, help="a text file, one sentence a line")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--max_batch_size", type=int, default=64)
    parser.add_argument("--batch_timeout_ms", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3, help="server and direct passes")
    parser.add_argument(
        "--settings",
        nargs="+",
        type=setting,
        default=list(SETTINGS),
        help="the server's workers x threads, a row each (default: 1xall 2x1)",
    )
    parser.add_argument("--direct", nargs=3, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--separate", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--alone", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("count", "clients", "max_batch_size", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1. Received: {getattr(args, name)}")
    sentences = read_lines(args.sentences)[: args.count]
    if args.direct:  # a direct row, in a process of its own: workers, threads, batch size
        workers, threads, batch_size = args.direct
        speed = direct_speed(
            args.model, sentences, batch_size, workers, threads or None, separate=args.separate
        )
        print(json.dumps(speed))
        return
    if args.alone:  # CTranslate2 alone, in a process of its own: inter, intra, batch size
        print(json.dumps(alone_speed(args.model, sentences, *args.alone)))
        return
    print(f"{args.model}, {len(sentences)} sentences, {args.clients} clients, ", end="")
    print(f"{os.cpu_count()} cores")
    print()
    print(
        "| workers x threads | mean batch | server, sentences/s | runners directly, sentences/s "
        "| server / direct | latency p50, ms | p90, ms | workers busy |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    results = []
    for workers, threads in args.settings:
        result = row(args, list(argv or sys.argv[1:]), sentences, workers, threads)
        results.append((workers, threads, result))
        print(
            f"| {workers} x {threads or 'all'} | {result['batch']:.1f} | {result['speed']:.1f} "
            f"| {result['direct']:.1f} | {result['ratio']:.2f}x "
            f"| {1000 * result['p50']:.0f} | {1000 * result['p90']:.0f} "
            f"| {100 * result['busy']:.0f}% |",
            flush=True,
        )
    alone = [(w, t, r) for w, t, r in results if "alone" in r]
    if alone:
        print(
            "\n| workers x threads | server | CTranslate2 alone at its best, same batches "
            "| its setting | server / alone | direct, one shared translator "
            "| direct, one per worker |"
        )
        print("| --- | ---: | ---: | --- | ---: | ---: | ---: |")
        for workers, threads, result in alone:
            separate = f"{result['separate']:.1f}" if "separate" in result else ""
            print(
                f"| {workers} x {threads or 'all'} | {result['speed']:.1f} "
                f"| {result['alone']:.1f} | {result['alone_setting']} "
                f"| {result['alone_ratio']:.2f}x | {result['direct']:.1f} | {separate} |"
            )


if __name__ == "__main__":
    main()

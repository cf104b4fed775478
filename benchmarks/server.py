"""The HTTP server (`python -m keras_transformer_runtime.serve`) under
concurrent clients, against its runner called directly.

    python benchmarks/server.py --model exports/multi30k.tflite \\
        --sentences data/multi30k/test_2016_flickr.en.gz --count 1000 --clients 8

`--clients` clients each send one sentence a request over a kept-alive
HTTP connection (TF Serving's `:predict`, `serving_default`) and wait for
the answer, the sentences of `--sentences` (the first `--count`) shared
among them. A row per `SETTINGS` entry (workers x threads per runner):
the server started with it (`--max_batch_size`, `--batch_timeout_ms`)
in a process of its own, and the same runners called directly in
another process, each worker thread translating consecutive batches of
the server's mean batch size (read from its `/metrics`), without HTTP,
JSON or queueing: `server / direct` is what serving costs. The two
alternate, `--rounds` times after a warm-up (so that the machine's drift
falls on both alike); a row gives the medians of the rounds' speeds and
of their ratios, and a request's median and 90th-percentile latency
over all rounds.
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

from keras_transformer_runtime.serve import load_runners  # noqa: E402
from keras_transformer_runtime.text_files import read_lines  # noqa: E402

# (workers, threads per runner: None for the cores shared among them)
SETTINGS = ((1, None), (2, 1))


def direct_speed(model, sentences, batch_size, workers=1, threads=None, passes=1):
    """Sentences/s of the runners the server would load (`workers`, each
    with `threads`), called directly: each worker thread translates the
    next `batch_size` consecutive sentences until none are left."""
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


def mean_batch(port):
    """`(batches, sentences)` the server on `port` has run (`/metrics`)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    samples = {}
    for line in text.splitlines():
        if line.startswith("translation_batch_size_"):
            name, value = line.split()
            samples[name] = float(value)
    return samples["translation_batch_size_count"], samples["translation_batch_size_sum"]


def direct_in_process(argv, workers, threads, batch_size):
    """Sentences/s of `direct_speed` in a process of its own (the cores to
    itself, as the server had them)."""
    command = [sys.executable, os.path.abspath(__file__), *argv]
    command += ["--direct", str(workers), str(threads or 0), str(batch_size)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def row(args, argv, sentences, workers, threads):
    """`{"speed", "direct", "ratio", "p50", "p90", "batch"}` of the clients
    against a server started with `workers` and `threads`: `--rounds`
    rounds, each a pass of the clients and then a pass of the runners
    called directly on batches of that pass's mean size (`batch`: the mean
    over the rounds), the medians of the rounds (`ratio`: of each round's
    server / direct, the two measured a minute apart at most)."""
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
            before = mean_batch(port)
            speed, pass_latencies = clients_pass(port, sentences, args.clients)
            after = mean_batch(port)
            batch = (after[1] - before[1]) / (after[0] - before[0])
            direct = direct_in_process(argv, workers, threads, max(1, round(batch)))
            rounds.append({"speed": speed, "direct": direct, "batch": batch})
            latencies += pass_latencies
    finally:
        server.terminate()
        server.wait()
    return {
        "speed": statistics.median(r["speed"] for r in rounds),
        "direct": statistics.median(r["direct"] for r in rounds),
        "ratio": statistics.median(r["speed"] / r["direct"] for r in rounds),
        "batch": statistics.mean(r["batch"] for r in rounds),
        "p50": statistics.median(latencies),
        "p90": statistics.quantiles(latencies, n=10)[-1],
    }


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
    parser.add_argument("--direct", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("count", "clients", "max_batch_size", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1. Received: {getattr(args, name)}")
    sentences = read_lines(args.sentences)[: args.count]
    if args.direct:  # a direct row, in a process of its own: workers, threads, batch size
        workers, threads, batch_size = args.direct
        print(json.dumps(direct_speed(args.model, sentences, batch_size, workers, threads or None)))
        return
    print(f"{args.model}, {len(sentences)} sentences, {args.clients} clients, ", end="")
    print(f"{os.cpu_count()} cores")
    print()
    print(
        "| workers x threads | mean batch | server, sentences/s | runners directly, sentences/s "
        "| server / direct | latency p50, ms | p90, ms |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for workers, threads in SETTINGS:
        result = row(args, list(argv or sys.argv[1:]), sentences, workers, threads)
        print(
            f"| {workers} x {threads or 'all'} | {result['batch']:.1f} | {result['speed']:.1f} "
            f"| {result['direct']:.1f} | {result['ratio']:.2f}x "
            f"| {1000 * result['p50']:.0f} | {1000 * result['p90']:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

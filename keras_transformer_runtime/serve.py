"""Serve an exported translator over HTTP: TF Serving's REST API,
`/translate`, a web page, `/metrics`, with dynamic batching.

    python -m keras_transformer_runtime.serve --model ende.tflite --port 8501

`--model` is any export the runtime runs: a `.tflite` file
(`export_litert`), an `.onnx` file (`export_onnx`), a CTranslate2
directory (`export_ctranslate2`), or a SavedModel directory or base
directory of versions (`export_saved_model`; TensorFlow is imported only
for it). Then, from a TF Serving client (examples/serving_client.py):

    curl -d '{"instances": ["A dog runs."]}' localhost:8501/v1/models/ende:predict

or a person: `curl -d '{"text": ["A dog runs."]}' localhost:8501/translate`,
or http://localhost:8501/ in a browser. Requests that arrive together are
translated together, up to `--max_batch_size` sentences or after
`--batch_timeout_ms` (`serving.batcher`), on `--workers` threads with a
runner each (a SavedModel: one, shared). Needs the `[serve]` extra
(`pip install -e ".[serve]"`: starlette, uvicorn, prometheus_client).
"""

import argparse
import os
import sys

from keras_transformer_runtime import validation
from keras_transformer_runtime.loading import load_runner
from keras_transformer_runtime.loading import runner_kind
from keras_transformer_runtime.serving.protocol import Limits


def load_runners(path, workers=1, threads=None, version=None, compute_type="default"):
    """A runner per worker for the export at `path` (`runner_kind`), each
    call on `threads` threads (default: the cores shared among the
    workers): one runner shared by every worker where it runs calls from
    several threads side by side (`Runner.shared_by_threads`: a SavedModel;
    CTranslate2, with `inter_threads` = workers, one copy of the weights),
    one each otherwise.

    Example:

    >>> [runner] = load_runners("ende.tflite")
    >>> runner.translate(["A dog runs."])
    ['Ein Hund läuft.']
    """
    validation.check_positive_int(workers=workers)
    validation.check_positive_int(allow_none=True, threads=threads)
    threads = threads or max(1, (os.cpu_count() or 1) // workers)
    if runner_kind(path) == "saved_model":  # TensorFlow's threads are the process's
        return [load_runner(path, version=version)] * workers
    first = load_runner(path, threads, compute_type=compute_type, parallel_calls=workers)
    if first.shared_by_threads:
        return [first] * workers
    others = [load_runner(path, threads, compute_type=compute_type) for _ in range(workers - 1)]
    return [first, *others]


def make_parser():
    parser = argparse.ArgumentParser(
        prog="python -m keras_transformer_runtime.serve",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", required=True, help="the export to serve (see above)")
    parser.add_argument("--model_name", help="TF Serving's model name (default: the file's)")
    parser.add_argument("--host", default="127.0.0.1", help="0.0.0.0 to listen on every address")
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--max_batch_size", type=int, default=64)
    parser.add_argument("--batch_timeout_ms", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=1, help="threads, each with a runner")
    parser.add_argument("--threads", type=int, help="each runner's threads (default: shared)")
    parser.add_argument("--version", type=int, help="a SavedModel base directory's version")
    parser.add_argument("--compute_type", default="default", help="CTranslate2's")
    parser.add_argument("--max_request_sentences", type=int, help="default: the export's")
    parser.add_argument("--max_request_tokens", type=int, help="default: the export's")
    return parser


def model_name_of(path):
    """TF Serving's name for the export at `path`: its file's name without
    the extension (`ende.tflite` -> `ende`); a SavedModel's base
    directory's."""
    base = os.path.basename(os.path.normpath(os.fspath(path)))
    return os.path.splitext(base)[0] or "model"


def main(argv=None):
    parser = make_parser()
    args = parser.parse_args(argv)
    positive = ("port", "max_batch_size", "workers", "threads")
    for name in (*positive, "max_request_sentences", "max_request_tokens"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            parser.error(f"--{name} must be positive. Received: --{name}={value}")
    if args.batch_timeout_ms < 0:
        parser.error(f"--batch_timeout_ms must be 0 or more. Received: {args.batch_timeout_ms}")
    try:
        from keras_transformer_runtime.serving.app import Server
        from keras_transformer_runtime.serving.app import import_starlette

        import_starlette()
        import uvicorn
    except ImportError as error:
        parser.error(f'{error} (uvicorn: pip install -e ".[serve]")')
    try:
        runners = load_runners(
            args.model, args.workers, args.threads, args.version, args.compute_type
        )
    except (ImportError, ValueError, FileNotFoundError) as error:
        parser.error(str(error))
    try:
        server = Server(
            runners,
            model_name=args.model_name or model_name_of(args.model),
            max_batch_size=args.max_batch_size,
            batch_timeout_ms=args.batch_timeout_ms,
            limits=Limits.of(runners[0], args.max_request_sentences, args.max_request_tokens),
        )
    except ValueError as error:
        parser.error(str(error))
    print(
        f"serving {server.model_name} ({runners[0].name}, {args.workers} worker(s)) on "
        f"http://{args.host}:{args.port}/",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(server.app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

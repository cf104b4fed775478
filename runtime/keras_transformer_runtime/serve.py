"""Serve an exported translator over HTTP: TF Serving's REST API,
`/translate`, a web page, `/metrics`, with dynamic batching.

    kt-serve --model ende.tflite --port 8501

`--model` is any export the runtime runs: a `.tflite` file
(`export_litert`), an `.onnx` file (`export_onnx`), a CTranslate2
directory (`export_ctranslate2`), or a SavedModel directory or base
directory of versions (`export_saved_model`; TensorFlow is imported only
for it; `--kind` names the kind where the path does not). A SavedModel
or CTranslate2 export answers with scores, alternatives (`n_best`) and
each word's confidence (the page shades words by it); a LiteRT or ONNX
export, whose search is inside the file, with the best translation and
its score only. Then, from a TF Serving client
(examples/serving_client.py):

    curl -d '{"instances": ["A dog runs."]}' localhost:8501/v1/models/ende:predict

or a person: `curl -d '{"text": ["A dog runs."]}' localhost:8501/translate`,
or http://localhost:8501/ in a browser. Requests that arrive together are
translated together, up to `--max_batch_size` sentences or after
`--batch_timeout_ms` (`serving.batcher`), on `--workers` threads with a
runner each (a SavedModel: one, shared). Needs the `[serve]` extra
(`pip install 'keras-transformer-runtime[serve]'`: starlette, uvicorn,
prometheus_client).
"""

import argparse
import os
import sys

from keras_transformer_runtime import command_line
from keras_transformer_runtime import validation
from keras_transformer_runtime.runners.loading import load_runner
from keras_transformer_runtime.runners.loading import runner_kind
from keras_transformer_runtime.serving.protocol import Limits


def load_runners(path, workers=1, threads=None, version=None, compute_type="default", kind=None):
    """A runner per worker for the export at `path` (of `kind`, default:
    read from the path, `runner_kind`), each
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
    kind = kind or runner_kind(path)
    if kind == "saved_model":  # TensorFlow's threads are the process's
        return [load_runner(path, version=version, kind=kind)] * workers
    options = {"compute_type": compute_type, "kind": kind}
    first = load_runner(path, threads, parallel_calls=workers, **options)
    if first.shared_by_threads:
        return [first] * workers
    others = [load_runner(path, threads, **options) for _ in range(workers - 1)]
    return [first, *others]


def make_parser():
    parser = argparse.ArgumentParser(
        prog="kt-serve",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command_line.add_model_arguments(parser, threads_help="each runner's threads (default: shared)")
    parser.add_argument("--model_name", help="TF Serving's model name (default: the file's)")
    parser.add_argument("--host", default="127.0.0.1", help="0.0.0.0 to listen on every address")
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--max_batch_size", type=int, default=64)
    parser.add_argument("--batch_timeout_ms", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=1, help="threads, each with a runner")
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
    command_line.check_positive(
        parser,
        args,
        *("port", "max_batch_size", "workers", "threads"),
        *("max_request_sentences", "max_request_tokens"),
    )
    if args.batch_timeout_ms < 0:
        parser.error(f"--batch_timeout_ms must be 0 or more. Received: {args.batch_timeout_ms}")
    path, kind = command_line.model_of(parser, args)
    try:
        from keras_transformer_runtime.serving.app import Server
        from keras_transformer_runtime.serving.app import import_starlette

        import_starlette()
        import uvicorn
    except ImportError as error:
        parser.error(f"{error} (uvicorn: pip install 'keras-transformer-runtime[serve]')")
    try:
        runners = load_runners(
            path, args.workers, args.threads, args.version, args.compute_type, kind
        )
    except (ImportError, ValueError, FileNotFoundError) as error:
        parser.error(str(error))
    try:
        server = Server(
            runners,
            model_name=args.model_name or model_name_of(path),
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

"""Translate text corpora on Apache Beam with any export, on this machine
or a cluster (`kt-translate-corpus`; `keras_transformer_runtime.corpus`).

    kt-translate-corpus --model exports/deen \\
        --input 'mono/*.de.gz' --output bt/ [--workers 2] [--mode sample]

`--model` is any export the runtime runs: a SavedModel directory (or
base directory of versions), a CTranslate2 directory, a `.tflite` or an
`.onnx` file (`--kind` names it where the path does not). `--input`
(repeatable) takes file patterns of plain or gzip (`.gz`) text, one
sentence or text per line. Each line's translation is a record of
`translations-*.jsonl` in `--output`, with its file and line number;
lines that are not translated (empty, invalid UTF-8, over
`--max_line_tokens`, refused by the export) are records of
`errors-*.jsonl`. Read in the order of their names, the files follow the
inputs' order; `summary.json` counts lines, translations and errors.

A killed run is rerun with the same command: the shards written whole
are kept, the others translated again, and the output is the same.

Without `--runner`, Beam runs the pipeline here with `--workers`
processes (default: one per core), each running its runner on `--threads`
threads (default: the cores shared among the workers). Any other Beam
option passes through to Beam, e.g. on Dataflow:

    kt-translate-corpus --model gs://b/deen_ct2 --kind ctranslate2 \\
        --input 'gs://b/mono/*.de.gz' --output gs://b/bt/ \\
        --runner DataflowRunner --project P --region R --temp_location gs://b/tmp \\
        --requirements_file requirements.txt

where every worker must be able to read the export (for a CTranslate2,
LiteRT or ONNX export, a path on the workers' image; a SavedModel, any
path TensorFlow reads). Needs the `[beam]` extra (`pip install
'keras-transformer-runtime[beam]'`).
"""

import argparse
import json
import os
import sys

from keras_transformer_runtime import command_line
from keras_transformer_runtime import logs
from keras_transformer_runtime.text import formats


def make_parser():
    parser = argparse.ArgumentParser(
        prog="kt-translate-corpus",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # Beam's own flags pass through whole
    )
    command_line.add_model_arguments(parser, threads_help="each runner's threads")
    parser.add_argument(
        "--input", action="append", required=True, help="a file pattern (repeatable)"
    )
    parser.add_argument("--output", required=True, help="the output directory")
    parser.add_argument(
        "--mode",
        choices=("translate", "sample"),
        default="translate",
        help="the export's search (beam, or greedy), or one random draw per line",
    )
    parser.add_argument("--seed", type=int, default=0, help="the seed of --mode sample")
    command_line.add_sampling_arguments(parser)
    parser.add_argument("--with_scores", action="store_true", help="record each score")
    parser.add_argument("--target_lang", help="a multilingual model's target language")
    parser.add_argument(
        "--format",
        choices=formats.NAMES,
        default="text",
        help="each line is text, an HTML fragment or Markdown (its markup kept)",
    )
    command_line.add_batch_size_argument(parser)
    parser.add_argument(
        "--shard_lines",
        type=int,
        help="lines per shard (default: about 4 per worker, 50 to 2,000; a rerun's: its run's)",
    )
    parser.add_argument(
        "--max_line_tokens", type=int, help="longer lines become error records (default: none)"
    )
    parser.add_argument("--workers", type=int, help="local worker processes (default: cores)")
    return parser


def main(argv=None):
    parser = make_parser()
    args, beam_options = parser.parse_known_args(argv)
    command_line.check_positive(
        parser, args, "batch_size", "shard_lines", "max_line_tokens", "workers", "threads"
    )
    export, kind = command_line.model_of(parser, args)
    try:
        from keras_transformer_runtime.corpus import pipeline as corpus
    except ImportError as error:
        parser.error(f"{error} (Apache Beam: pip install 'keras-transformer-runtime[beam]')")
    from keras_transformer_runtime import processes
    from keras_transformer_runtime.corpus.shards import CorpusJob

    cores = os.cpu_count() or 1
    workers = args.workers or cores
    local = not any(option.startswith("--runner") for option in beam_options)
    # Here, the cores shared among the workers; on a cluster, the runtime's choice.
    threads = args.threads or (max(1, cores // workers) if local else None)
    export_options = {"version": args.version, "compute_type": args.compute_type, "kind": kind}
    export_options.update(command_line.sampling_settings(parser, args))
    try:
        job = CorpusJob(
            mode=args.mode,
            batch_size=args.batch_size,
            shard_lines=args.shard_lines,
            with_scores=args.with_scores,
            seed=args.seed,
            target_lang=args.target_lang,
            max_line_tokens=args.max_line_tokens,
            format=args.format,
        )
        processes.skip_collection_at_exit()  # this process ends with `main`
        logs.filter_native_logs(["--verbose"] if args.verbose else [])  # Beam workers' chatter
        summary = corpus.translate_corpus(
            args.input,
            args.output,
            export,
            job,
            workers=workers,
            threads=threads,
            beam_options=beam_options,
            **export_options,
        )
    except ValueError as error:
        parser.error(str(error))
    print(json.dumps(summary, sort_keys=True), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

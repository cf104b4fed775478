"""Translate text corpora on Apache Beam: any export, any Beam runner.

`translate_corpus` reads text files (plain, or gzip by a `.gz` suffix;
any filesystem Beam reads), numbers their lines, groups them into shards
of `shard_lines` lines, translates each shard with a runner loaded once
per worker (`loading.load_runner`: a SavedModel, CTranslate2, LiteRT or
ONNX export), and writes each shard's records as `corpus_shards` names
them, so that the outputs follow the inputs' order. Needs the `[beam]`
extra (`pip install 'keras-transformer-runtime[beam]'`).

Safe to rerun: a shard is written to a temporary file and renamed when
whole, so an output file is either complete or absent; a rerun into the
same directory keeps the shards written before (the same lines, the same
settings: `corpus.json` records them, and a rerun with other settings or
inputs is refused) and translates the others. A line that is not
translated is an error record (`errors-*.jsonl`), never a missing line
or a failed job.

Example:

>>> summary = translate_corpus(["mono/*.de.gz"], "bt/", "exports/deen", workers=2)
>>> summary["lines"], summary["errors"]
(20000, 3)
>>> next(read_records("bt/"))["translation"]
'A dog runs.'
"""

import functools
import logging
import time

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import DirectOptions
from apache_beam.options.pipeline_options import PipelineOptions

from keras_transformer_runtime import processes
from keras_transformer_runtime import validation
from keras_transformer_runtime.corpus import inputs as corpus_inputs
from keras_transformer_runtime.corpus import shards as corpus_shards
from keras_transformer_runtime.corpus.inputs import match_inputs
from keras_transformer_runtime.corpus.output import NAMESPACE
from keras_transformer_runtime.corpus.output import SUMMARY  # noqa: F401  (the API's)
from keras_transformer_runtime.corpus.output import CorpusRun
from keras_transformer_runtime.corpus.output import read_file
from keras_transformer_runtime.corpus.output import read_manifest
from keras_transformer_runtime.corpus.output import read_records  # noqa: F401  (the API's)
from keras_transformer_runtime.corpus.output import write_atomically
from keras_transformer_runtime.corpus.shards import ERRORS
from keras_transformer_runtime.corpus.shards import TRANSLATIONS
from keras_transformer_runtime.corpus.shards import CorpusJob
from keras_transformer_runtime.runners import loading
from keras_transformer_runtime.text import files as text_files


class ReadNumberedLines(beam.DoFn):
    """`(file_index, path)` -> each line as `((file_index, shard),
    (number, bytes))`, numbered from 1 (`text_files`' lines)."""

    def __init__(self, job):
        self.job = job

    def process(self, element):
        file_index, path = element
        with corpus_inputs.open_lines(path) as f:  # gzip by the `.gz` suffix, checked
            for number, line in enumerate(text_files.byte_lines(iter(f.readline, b"")), 1):
                yield (file_index, self.job.shard_of(number)), (number, line)


class TranslateShards(beam.DoFn):
    """`((file_index, shard), lines)` -> the shard's records, its errors
    as the `"errors"` output; each shard written to `output` (a shard
    already there is read back, not translated again). `worker_processes`:
    each worker is a process of its own that ends with the pipeline, so
    its exit may skip the last garbage collection (`processes`)."""

    def __init__(self, load_runner, job, output, worker_processes=False, paths=()):
        self.load_runner, self.job, self.output = load_runner, job, output
        self.worker_processes, self.paths = worker_processes, list(paths)
        self.lines = Metrics.counter(NAMESPACE, "lines")
        self.translated = Metrics.counter(NAMESPACE, "translated")
        self.errors = Metrics.counter(NAMESPACE, "errors")
        self.kept = Metrics.counter(NAMESPACE, "kept_from_earlier_runs")
        self.loading = Metrics.distribution(NAMESPACE, "loading_ms")
        self.batch_size = Metrics.distribution(NAMESPACE, "batch_size")

    def setup(self):
        start = time.perf_counter()
        self.runner = self.load_runner()
        self.loading_ms = round(1000 * (time.perf_counter() - start))  # counted once in a bundle
        if self.worker_processes:
            processes.skip_collection_at_exit()
        if self.job.target_lang is not None:  # a language the model lacks stops the job
            self.runner.languages.check(self.job.target_lang)

    def process(self, element):
        if self.loading_ms is not None:
            self.loading.update(self.loading_ms)
            self.batch_size.update(self.runner.resolve_batch_size(self.job.batch_size))
            self.loading_ms = None
        (file_index, shard), lines = element
        lines = list(lines)
        done = self._path(TRANSLATIONS, file_index, shard)
        if FileSystems.exists(done):
            records = read_file(done)
            errors = read_file(self._path(ERRORS, file_index, shard), missing_ok=True)
            self.kept.inc(len(records) + len(errors))
        else:
            start = time.perf_counter()
            path = self.paths[file_index] if file_index < len(self.paths) else None
            records, errors = corpus_shards.translate_shard(
                self.runner, self.job, file_index, lines, path
            )
            if errors:
                write_atomically(self._path(ERRORS, file_index, shard), errors)
            write_atomically(done, records)  # last: the shard is done once it exists
            self.translated.inc(len(records))
            logging.info(
                "shard %d of input %d: %d lines translated, %d errors, %.1f lines/s",
                shard,
                file_index,
                len(records),
                len(errors),
                len(lines) / max(time.perf_counter() - start, 1e-9),
            )
        self.lines.inc(len(lines))
        self.errors.inc(len(errors))
        yield from records
        for error in errors:
            yield beam.pvalue.TaggedOutput(ERRORS, error)

    def _path(self, kind, file_index, shard):
        return FileSystems.join(self.output, corpus_shards.shard_name(kind, file_index, shard))


class TranslateCorpus(beam.PTransform):
    """Translates the files `paths` (listed, not patterns: their order
    numbers them) into `output`, shard by shard (see the module): a
    `PTransform` of a pipeline's root, whose result has the translation
    records as its main output and the error records as `.errors`.

    Args:
        paths: the input files, in order.
        output: the output directory.
        load_runner: a picklable function without arguments that returns
            the runner, called once on each worker.
        job: the `CorpusJob`.
        worker_processes: whether each worker is a process of its own that
            ends with the pipeline (Beam's local runner with several
            workers), whose exit then skips the last garbage collection:
            a process with TensorFlow loaded spends seconds in it.
    """

    def __init__(self, paths, output, load_runner, job, worker_processes=False):
        super().__init__()
        self.paths, self.output, self.load_runner, self.job = list(paths), output, load_runner, job
        self.worker_processes = worker_processes

    def expand(self, root):
        return (
            root
            | "Inputs" >> beam.Create(list(enumerate(self.paths)))
            | "Spread inputs" >> beam.Reshuffle()
            | "Read lines" >> beam.ParDo(ReadNumberedLines(self.job))
            | "Group shards" >> beam.GroupByKey()
            | "Translate shards"
            >> beam.ParDo(
                TranslateShards(
                    self.load_runner, self.job, self.output, self.worker_processes, self.paths
                )
            ).with_outputs(ERRORS, main=TRANSLATIONS)
        )


def local_runner():
    """Beam's local runner, without trying Prism first (as `DirectRunner`
    does, downloading it): `FnApiRunner`, in this process for one worker,
    or with one process per worker (`direct_num_workers`)."""
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    return FnApiRunner()


def translate_corpus(
    inputs,
    output,
    export,
    job=None,
    workers=1,
    threads=None,
    beam_options=None,
    load_runner=None,
    **export_options,
):
    """Translates the files `inputs` matches into `output` (see the
    module's docstring) and returns the summary: `lines`, `translated`
    (this run), `errors`, `kept_from_earlier_runs`, `seconds`,
    `sentences_per_second` (this run's translated lines over `seconds`,
    which count the workers' loading), `loading_seconds` (the slowest
    worker's loading of its runner) and `batch_size` (the sentences per
    call: `job.batch_size`, or the runner's `bulk_batch_size`).

    Args:
        inputs: file patterns (`"mono/*.de.gz"`); the files they match are
            numbered in sorted order.
        output: the output directory.
        export: the export's path (`loading.runner_kind`), readable where
            the workers run.
        job: a `CorpusJob` (default: beam search, as exported).
        workers: worker processes when run locally (no `--runner` in
            `beam_options`): one runs in this process.
        threads: each runner's threads (default: the runtime's choice).
        beam_options: Beam's pipeline options, a list of flags
            (`["--runner=DataflowRunner", "--project=...", ...]`).
        load_runner: instead of loading `export`, a picklable function
            without arguments that returns a runner.
        **export_options: `load_runner`'s `version` and `compute_type`.

    Raises:
        ValueError: a pattern matches nothing, or `output` is a file or
            holds another translation's outputs.
    """
    validation.check_positive_int(workers=workers)
    job = job or CorpusJob()
    files = match_inputs(list(inputs))
    load_runner = load_runner or functools.partial(
        loading.load_runner, export, threads, **export_options
    )
    kind = export_options.get("kind") or loading.runner_kind_or_none(export)
    if kind != "saved_model":  # TensorFlow's threads are set once per process: its workers'
        job.check(load_runner())  # a job the export cannot run fails before anything is written
    checked = corpus_inputs.checked(files)
    if job.shard_lines is None:  # as the output's run had them, else sized here
        earlier = (read_manifest(output) or {}).get("job", {}).get("shard_lines")
        job = job.sized(sum(lines for *_, lines in checked), workers, earlier)
    run = CorpusRun(checked, output, str(export), corpus_inputs.export_digest(export), job)
    started = run.prepare()
    try:
        result, seconds = _run_pipeline(run, load_runner, workers, beam_options)
    except BaseException:
        if started:
            run.forget()
        raise
    run.remove_temporary_files()
    return run.summary(result, seconds)


def _run_pipeline(run, load_runner, workers, beam_options):
    """Runs `run`'s pipeline: its Beam result and seconds."""
    options = PipelineOptions(beam_options or [])
    direct = options.view_as(DirectOptions)
    direct.direct_num_workers = workers
    direct.direct_running_mode = "multi_processing" if workers > 1 else "in_memory"
    local = not options.get_all_options()["runner"]
    runner = local_runner() if local else None
    start = time.perf_counter()
    pipeline = beam.Pipeline(runner=runner, options=options)
    paths = [path for path, *_ in run.inputs]
    worker_processes = local and workers > 1
    _ = pipeline | TranslateCorpus(paths, run.output, load_runner, run.job, worker_processes)
    result = pipeline.run()
    result.wait_until_finish()
    return result, time.perf_counter() - start

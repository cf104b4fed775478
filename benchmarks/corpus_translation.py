"""Corpus translation: the Apache Beam pipeline (`python -m
keras_transformer_runtime.translate_corpus`) against a single-process loop over
the same export.

    python benchmarks/corpus_translation.py --export exports/multi30k \\
        --sentences data/multi30k/train.en.gz --count 20000

Rows, each in a process of its own on the first `--count` lines of
`--sentences`:

* `loop`: one process, the runner on all the cores (`--threads`, default
  the cores), `runner.translate` over the lines sorted by length in
  batches of `--batch_size` (default: the runner's `bulk_batch_size`, as
  each row's), as a Python loop over a corpus runs;
* `beam 1 worker`: the pipeline with one worker process with the cores'
  threads;
* `beam N workers`: the pipeline with a worker process per core, one
  thread each;
* `N loops side by side`: the ceiling of that pipeline, the loop in a
  process per core, one thread each, each taking the next of the loop's
  batches that none has taken, timed from a barrier passed once all have
  loaded: the workers' speed side by side, balanced, without the
  pipeline's fixed costs (starting and loading its workers, reading,
  writing, tearing down).

Two speeds a row: `after loading` counts the wall time once the runner
is loaded (the loop's: its batches after a warm-up batch; the pipeline's:
its summary's `seconds` less its `loading_seconds`, the slowest worker's
loading, so its workers' start, first call, reading, grouping, writing
and exit stay in); `with loading` counts the loading too (the loop's:
loading the runner, the warm-up and the batches; the pipeline's: its
summary's `seconds`), which is what the user waits for. The side-by-side
ceiling has no `with loading`. `identical` counts the lines whose
translation is the loop's.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from keras_transformer_runtime.batching import length_batches  # noqa: E402
from keras_transformer_runtime.text import files as text_files  # noqa: E402


def line_batches(lines, batch_size):
    """The lines' indices sorted by length, cut into batches of
    `batch_size`: the batches of every row but the pipeline's."""
    return length_batches(len(lines), lambda i: len(lines[i]), batch_size)


def translate_batches(runner, lines, batches, batch_size):
    """`{index: translation}` for the lines of `batches` (lists of
    indices), each batch one call of `runner.translate`."""
    translations = {}
    for batch in batches:
        found = runner.translate([lines[i] for i in batch], batch_size=batch_size)
        translations.update(zip(batch, found, strict=True))
    return translations


def write_lines(output, translations):
    """Writes `translations` to `output`, one line each (a translation's
    own line breaks become spaces)."""
    with open(output, "w", encoding="utf-8") as f:
        f.writelines(" ".join(t.splitlines()) + "\n" for t in translations)


def loop_row(export, path, threads, batch_size, output):
    """The loop's translations (written to `output`, one per line) and its
    sentences/s."""
    from keras_transformer_runtime.runners.loading import load_runner

    lines = text_files.read_lines(path)
    loading = time.perf_counter()
    runner = load_runner(export, threads=threads)
    batch_size = runner.resolve_batch_size(batch_size)
    runner.translate(lines[:batch_size], batch_size=batch_size)  # warm-up: traces, allocates
    start = time.perf_counter()
    translations = translate_batches(runner, lines, line_batches(lines, batch_size), batch_size)
    seconds = time.perf_counter() - start
    write_lines(output, (translations[i] for i in range(len(lines))))
    return speeds(len(lines), seconds, start - loading, batch_size)


def speeds(lines, seconds, loading_seconds, batch_size):
    """A row's result: `lines` translated in `seconds` after
    `loading_seconds` of loading (`None`: not counted), in batches of
    `batch_size`."""
    with_loading = None if loading_seconds is None else lines / (seconds + loading_seconds)
    return {
        "batch_size": batch_size,
        "sentences_per_second": lines / seconds,
        "with_loading": with_loading,
        "seconds": seconds,
        "loading_seconds": loading_seconds,
    }


def untaken(batches, next_batch):
    """The `batches` that no other process has taken, one at a time
    (`next_batch`: a counter the processes share)."""
    while True:
        with next_batch.get_lock():
            number = next_batch.value
            next_batch.value += 1
        if number >= len(batches):
            return
        yield batches[number]


def side_by_side_part(export, lines, batch_size, barrier, next_batch, results):
    """One of the side-by-side loops (a process of its own): loads the
    runner on one thread, waits for the others at `barrier`, then
    translates the loop's batches that no other has taken (`untaken`) and
    puts `(seconds, {index: translation}, batch_size)` on `results`."""
    from keras_transformer_runtime.runners.loading import load_runner

    runner = load_runner(export, threads=1)
    batch_size = runner.resolve_batch_size(batch_size)
    batches = line_batches(lines, batch_size)
    runner.translate(lines[:batch_size], batch_size=batch_size)  # warm-up, as the loop's
    barrier.wait()
    start = time.perf_counter()
    translations = translate_batches(runner, lines, untaken(batches, next_batch), batch_size)
    results.put((time.perf_counter() - start, translations, batch_size))


def side_by_side_row(export, path, processes, batch_size, output):
    """`processes` one-thread loops at once, sharing the loop's batches
    (each takes the next one left): their translations (in input order, to
    `output`) and the lines over the seconds from the barrier to the last
    one's end."""
    import multiprocessing
    import queue

    lines = text_files.read_lines(path)
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(processes), context.Queue()
    next_batch = context.Value("i", 0)
    parts = [
        context.Process(
            target=side_by_side_part,
            args=(export, lines, batch_size, barrier, next_batch, results),
        )
        for _ in range(processes)
    ]
    for part in parts:
        part.start()
    done = []
    while len(done) < processes:
        try:
            done.append(results.get(timeout=1.0))
        except queue.Empty:
            failed = [part.exitcode for part in parts if part.exitcode not in (None, 0)]
            if failed:
                barrier.abort()
                raise RuntimeError(f"a side-by-side loop failed (exit codes {failed})") from None
    for part in parts:
        part.join()
    translations = {}
    for _, part_translations, _ in done:
        translations.update(part_translations)
    write_lines(output, (translations[i] for i in range(len(lines))))
    seconds = max(part_seconds for part_seconds, _, _ in done)
    return speeds(len(lines), seconds, None, done[0][2])


def beam_row(export, path, workers, threads, batch_size, shard_lines, output):
    """The pipeline's summary and its translations (one per line)."""
    from keras_transformer_runtime.corpus import pipeline as corpus
    from keras_transformer_runtime.corpus.shards import CorpusJob

    job = CorpusJob(batch_size=batch_size, shard_lines=shard_lines)
    directory = output + ".beam"
    summary = corpus.translate_corpus(
        [path], directory, export, job, workers=workers, threads=threads
    )
    write_lines(output, (r.get("translation", "<error>") for r in corpus.read_records(directory)))
    loading = summary["loading_seconds"]
    seconds = summary["seconds"] - loading
    return speeds(summary["translated"], seconds, loading, summary["batch_size"])


def run_row(args, row, path, output):
    """A row in a process of its own (this script with `--row`)."""
    command = [sys.executable, os.path.abspath(__file__), "--row", json.dumps(row)]
    command += ["--export", args.export, "--input", path, "--output", output]
    command += ["--shard_lines", str(args.shard_lines)]
    if args.batch_size:
        command += ["--batch_size", str(args.batch_size)]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"row {row} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--export", required=True, help="any export (loading.runner_kind)")
    parser.add_argument("--sentences", help="a text file, plain or .gz")
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--batch_size", type=int, help="default: each runner's bulk_batch_size")
    parser.add_argument("--shard_lines", type=int, default=2000)
    parser.add_argument("--row", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.row:  # one row, in this process
        row = json.loads(args.row)
        if row["kind"] == "loop":
            result = loop_row(args.export, args.input, row["threads"], args.batch_size, args.output)
        elif row["kind"] == "side_by_side":
            result = side_by_side_row(
                args.export, args.input, row["processes"], args.batch_size, args.output
            )
        else:
            result = beam_row(
                args.export,
                args.input,
                row["workers"],
                row["threads"],
                args.batch_size,
                args.shard_lines,
                args.output,
            )
        print(json.dumps(result))
        return None
    cores = os.cpu_count() or 1
    rows = {
        "loop": {"kind": "loop", "threads": cores},
        "beam 1 worker": {"kind": "beam", "workers": 1, "threads": cores},
        f"beam {cores} workers": {"kind": "beam", "workers": cores, "threads": 1},
        f"{cores} loops side by side": {"kind": "side_by_side", "processes": cores},
    }
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "input.txt")
        lines = text_files.read_lines(args.sentences)[: args.count]
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
        results, outputs = {}, {}
        for name, row in rows.items():
            outputs[name] = os.path.join(directory, name.replace(" ", "_") + ".txt")
            results[name] = run_row(args, row, path, outputs[name])
            print(f"{name}: {results[name]['sentences_per_second']:.1f} sentences/s", flush=True)
        reference = text_files.read_lines(outputs["loop"])
        print(f"\n{len(lines):,} sentences, {args.export}\n")
        print(
            "| row | batch | after loading, sentences/s | x loop | with loading, sentences/s "
            "| x loop | loading, s | identical lines |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        loop = results["loop"]
        for name, result in results.items():
            found = text_files.read_lines(outputs[name])
            same = sum(a == b for a, b in zip(found, reference, strict=True))
            speed, with_loading = result["sentences_per_second"], result["with_loading"]
            cells = [name, str(result["batch_size"]), f"{speed:.1f}"]
            cells.append(f"{speed / loop['sentences_per_second']:.2f}")
            if with_loading is None:
                cells += ["-", "-", "-"]
            else:
                ratio = with_loading / loop["with_loading"]
                cells += [f"{with_loading:.1f}", f"{ratio:.2f}", f"{result['loading_seconds']:.2f}"]
            print("| " + " | ".join([*cells, f"{same:,} / {len(reference):,}"]) + " |")
    return results


if __name__ == "__main__":
    main()

"""Quality and speed of a trained model: our SavedModel against its
CTranslate2 export (float32 and int8), and Keras's int8 quantization.

    pip install -e ".[ctranslate2]"
    python benchmarks/ctranslate2_translation.py --run_dir runs/multi30k \\
        --test_src data/multi30k/test_2016_flickr.en.gz \\
        --test_ref data/multi30k/test_2016_flickr.de.gz

`--run_dir` is a `model_dir` of `examples/wmt_ende.py` after its export
stage: the model is rebuilt from its `config.json` with the weights its
`export.json` names, and translated with its beam size and alpha. Each
row translates the whole test set in batches of 64 (sacreBLEU against the
reference, sentences/s), then the first `--single` sentences one at a
time (sentences/s at batch 1). Each speed is the faster of two passes
after a warm-up batch, and each row runs in a process of its own, as
each runtime runs in a server: a CTranslate2 process never loads
TensorFlow, and no two runtimes share the cores (two CTranslate2
translators in one process, whose OpenMP threads wait spinning, made
each 5x slower at batch 1). The rows:

* `SavedModel float32, session loader`: `export_saved_model`, loaded by
  the TF1 session loader as TF Serving's C++ server loads and runs it
  (`serving_default`, TF Serving's default session settings); the
  baseline the other rows are compared with;
* `SavedModel float32, tf.saved_model.load`: the same export as a Python
  server runs it;
* `CTranslate2 float32` / `CTranslate2 int8`: `export_ctranslate2`, then
  `CTranslate2Translator` with that compute type, with the same beam and
  alpha, at its best: the row runs once per `intra_threads` of
  `thread_counts()` (1, 2, 4, ... and all cores), each in a process of its
  own, and each speed is the fastest, printed with its thread count (on 2
  cores with one thread per core, all cores made CTranslate2 5x slower one
  sentence at a time than one thread);
* `Translator int8 (Keras)`: the model's `Dense` layers quantized by
  `keras.Model.quantize("int8")` (embeddings stay float32), run by
  `Translator` in Python (`--keras_int8 no` skips this slowest row; a
  failure is reported as the row's result).

Also printed: how many test sentences each row translates exactly as the
float32 SavedModel through the session loader does.
"""

import argparse
import json
import os
import subprocess
import sys
import time

from script_workers import scratch_directory
from script_workers import thread_counts

from keras_transformer_runtime import text_files

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

MODEL_SETTINGS = (
    "num_layers",
    "d_model",
    "num_heads",
    "d_ff",
    "norm_first",
    "position_encoding",
    "max_length",
)


def load_run(run_dir):
    """The run's `(model, tokenizer, config)`, with its exported weights."""
    import keras_transformer as kt
    from keras_transformer import training
    from keras_transformer.tokenization import SentencePieceTokenizer

    with open(os.path.join(run_dir, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(run_dir, "export.json")) as f:
        exported = json.load(f)
    tokenizer = SentencePieceTokenizer.from_file(os.path.join(run_dir, "spm.model"))
    overrides = {k: config[k] for k in MODEL_SETTINGS if config.get(k) is not None}
    model = kt.Transformer.from_preset(
        config["model"], vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id, **overrides
    )
    paths = []
    for name in exported["checkpoints"]:
        found = [
            os.path.join(run_dir, where, name)
            for where in ("best", "averaging", "checkpoints")
            if os.path.exists(os.path.join(run_dir, where, f"{name}.index"))
        ]
        if not found:
            raise SystemExit(f"{run_dir}: checkpoint {name} (export.json) not found")
        paths.append(found[0])
    training.average_checkpoints(model, paths)
    return model, tokenizer, config


def timed(translate, sources, batch_size, passes=2):
    """`(outputs, sentences per second)` of `translate` over `sources` in
    batches of `batch_size`: the faster of `passes` passes after one
    untimed warm-up batch (a first pass also pays for the allocations of
    each new batch shape, in every runtime)."""
    translate(sources[:batch_size])
    speeds = []
    for _ in range(passes):
        start = time.perf_counter()
        outputs = []
        for i in range(0, len(sources), batch_size):
            outputs += translate(sources[i : i + batch_size])
        speeds.append(len(sources) / (time.perf_counter() - start))
    return outputs, max(speeds)


def ct2_translate(directory, compute_type, threads):
    """`translate(batch)` of the CTranslate2 export at `directory` with
    `threads` intra-op threads."""
    from keras_transformer_runtime import CTranslate2Translator

    return CTranslate2Translator(
        directory, compute_type=compute_type, intra_threads=threads
    ).translate


def saved_model_translate(directory, loader):
    """`translate(batch)` through the SavedModel's `serving_default`,
    loaded by the TF1 session loader (`"session"`, TF Serving's) or by
    `tf.saved_model.load` (`"load"`)."""
    import numpy as np
    import tensorflow_text  # noqa: F401 (registers the SentencePiece ops the graph holds)

    from comparison.served import signatures

    serve = signatures(directory, loader)("serving_default")

    def translate(batch):
        outputs = serve(text=np.array(batch, dtype=object))["translation"]
        return [t.decode("utf-8") for t in outputs]

    return translate


def run_translator(model, tokenizer, config, **changes):
    """A `Translator` of a run's model with the run's beam size and alpha
    (`changes` replace them: `beam_size=1` for greedy search)."""
    import keras_transformer as kt

    settings = {"beam_size": config["beam_size"], "alpha": config["alpha"], **changes}
    return kt.Translator(model, tokenizer, **settings)


def keras_int8_translate(run_dir):
    """`translate(batch)` of `Translator` over the run's model with its
    `Dense` layers quantized to int8 by Keras."""
    model, tokenizer, config = load_run(run_dir)
    model.quantize("int8")
    return run_translator(model, tokenizer, config).translate


ROWS = {
    "SavedModel float32, session loader": ("saved_model", "session"),
    "SavedModel float32, tf.saved_model.load": ("saved_model", "load"),
    "CTranslate2 float32": ("ct2_float32", "float32"),
    "CTranslate2 int8": ("ct2_int8", "int8"),
    "Translator int8 (Keras)": ("run_dir", "keras_int8"),
}


# The peers' rows, which run at their fastest thread count (`fastest_row`).
PEERS = ("CTranslate2 float32", "CTranslate2 int8")


def worker(row, path, work, single, threads):
    """Runs one row (a `ROWS` key) on the sources in `work` (a peer with
    `threads` intra-op threads): writes its outputs and speeds to
    `work/result.json`."""
    _, how = ROWS[row]
    if how in ("session", "load"):
        translate = saved_model_translate(path, how)
    elif how == "keras_int8":
        translate = keras_int8_translate(path)
    else:
        translate = ct2_translate(path, how, threads)
    sources = text_files.read_lines(os.path.join(work, "sources.txt"))
    outputs, batch_speed = timed(translate, sources, 64)
    _, single_speed = timed(translate, sources[:single], 1)
    with open(os.path.join(work, "result.json"), "w") as f:
        json.dump({"outputs": outputs, "batch": batch_speed, "single": single_speed}, f)


def run_row(row, path, work, single, script=__file__, threads=None):
    """`worker` of `script` (this one, or another that runs its rows as
    this one does) in a fresh process: its result, or the reason it
    failed."""
    result = os.path.join(work, "result.json")
    if os.path.exists(result):
        os.remove(result)
    command = [sys.executable, os.path.abspath(script), "--worker", row, "--path", path]
    command += ["--work", work, "--single", str(single)]
    command += ["--threads", str(threads or os.cpu_count())]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["no output"]
        return f"failed: exit {done.returncode}: {lines[-1]}"
    with open(result) as f:
        return json.load(f)


def fastest_row(row, path, work, single, script=__file__):
    """`run_row` once per `thread_counts()`, each in its own process: the
    result with each speed the fastest (the outputs of the fastest in
    batches), and `"batch_threads"`, `"single_threads"`: the thread counts
    that gave them; or the reason a run failed."""
    best, speeds = None, {}
    for threads in thread_counts():
        result = run_row(row, path, work, single, script, threads)
        if isinstance(result, str):
            return f"{result} (intra_threads={threads})"
        speeds[threads] = (result["batch"], result["single"])
        if best is None or result["batch"] > best["batch"]:
            best = {**(best or result), "outputs": result["outputs"], "batch": result["batch"]}
            best["batch_threads"] = threads
        if "single_threads" not in best or result["single"] > best["single"]:
            best["single"], best["single_threads"] = result["single"], threads
    best["by_threads"] = speeds
    return best


def thread_note(row, result):
    """A line with a peer row's speeds at each thread count, or None."""
    if "by_threads" not in result:
        return None
    speeds = "; ".join(
        f"{threads}: {batch:.1f} / {single:.1f}"
        for threads, (batch, single) in result["by_threads"].items()
    )
    return f"{row}, sentences/s (batch 64 / batch 1) by intra_threads: {speeds}"


def run_any_row(row, path, work, single, script=__file__):
    """A peer's row at its fastest (`fastest_row`), ours as served."""
    if row in PEERS:
        return fastest_row(row, path, work, single, script)
    return run_row(row, path, work, single, script)


def speed(result, key):
    """A row's sentences/s (`"batch"` or `"single"`), with the peer's
    thread count."""
    threads = result.get(f"{key}_threads")
    count = "" if threads is None else f" ({threads} thread{'s' * (threads > 1)})"
    return f"{result[key]:.1f}{count}"


def run_parser(description):
    """The arguments of a script that measures a run's model on a test set
    in one process: `--run_dir`, `--test_src`, `--test_ref` (required),
    `--max_sentences` (`read_test_set` reads them)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for name in ("run_dir", "test_src", "test_ref"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--max_sentences", type=int, help="use only the first N test sentences")
    return parser


def argument_parser(description, rows):
    """The arguments of a script that measures a run's exports on a test
    set, each of `rows` in a worker process (this one's, `on_device.py`)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run_dir")
    parser.add_argument("--test_src")
    parser.add_argument("--test_ref")
    parser.add_argument("--single", type=int, default=100, help="sentences timed at batch 1")
    parser.add_argument("--max_sentences", type=int, help="use only the first N test sentences")
    parser.add_argument("--worker", choices=sorted(rows), help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    return parser


def parsed(parser):
    """`parser`'s arguments; outside a worker, `--run_dir`, `--test_src` and
    `--test_ref` are required."""
    args = parser.parse_args()
    for name in ("run_dir", "test_src", "test_ref"):
        if not args.worker and not getattr(args, name):
            parser.error(f"--{name} is required")
    return args


def read_test_set(args):
    """`(sources, references)`, the first `--max_sentences` if given."""
    sources, references = text_files.read_lines(args.test_src), text_files.read_lines(args.test_ref)
    if args.max_sentences:
        sources, references = sources[: args.max_sentences], references[: args.max_sentences]
    return sources, references


def main():
    parser = argument_parser(__doc__, ROWS)
    parser.add_argument(
        "--keras_int8",
        choices=("yes", "no"),
        default="yes",
        help="also measure Keras's int8 quantization (the slowest row)",
    )
    args = parsed(parser)
    if args.worker:
        return worker(args.worker, args.path, args.work, args.single, args.threads)

    import sacrebleu

    from keras_transformer.export import export_ctranslate2
    from keras_transformer.export import export_saved_model

    sources, references = read_test_set(args)
    model, tokenizer, config = load_run(args.run_dir)
    translator = run_translator(model, tokenizer, config)
    work = scratch_directory("ct2_translation_")
    with open(os.path.join(work, "sources.txt"), "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in sources)
    paths = {
        "saved_model": export_saved_model(translator, os.path.join(work, "saved_model")),
        "run_dir": args.run_dir,
    }
    for quantization in ("float32", "int8"):
        paths[f"ct2_{quantization}"] = os.path.join(work, f"ct2_{quantization}")
        export_ctranslate2(translator, paths[f"ct2_{quantization}"], quantization=quantization)

    print(
        f"{len(sources)} test sentences, beam {translator.settings.beam_size}, "
        f"alpha {translator.settings.alpha}, {os.cpu_count()} cores; "
        f"batch 1 on the first {args.single}"
    )
    print("| | BLEU | same as SavedModel | sentences/s, batch 64 | sentences/s, batch 1 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    baseline, notes = None, []
    for row, (path, _) in ROWS.items():
        if row == "Translator int8 (Keras)" and args.keras_int8 == "no":
            continue
        result = run_any_row(row, paths[path], work, args.single)
        if isinstance(result, str):
            print(f"| {row} | {result} | | | |", flush=True)
            continue
        outputs = result["outputs"]
        baseline = baseline or outputs
        bleu = sacrebleu.corpus_bleu(outputs, [references]).score
        same = sum(a == b for a, b in zip(outputs, baseline, strict=True))
        print(
            f"| {row} | {bleu:.2f} | {same}/{len(sources)} | {speed(result, 'batch')} | "
            f"{speed(result, 'single')} |",
            flush=True,
        )
        notes.append(thread_note(row, result))
    print("\n".join(note for note in notes if note))


if __name__ == "__main__":
    main()

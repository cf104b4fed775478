"""Quality and speed of a trained model: our SavedModel against its
CTranslate2 export (float32 and int8), and Keras's int8 quantization.

    pip install -e ".[ctranslate2]"
    python benchmarks/ctranslate2_translation.py --run_dir runs/multi30k \\
        --test_src data/multi30k/test_2016_flickr.en.gz \\
        --test_ref data/multi30k/test_2016_flickr.de.gz

`--run_dir` is a `model_dir` of `examples/wmt_ende.py` after its export
stage: the model is rebuilt from its `config.json` with the weights its
`export.json` names, and translated with its beam size and alpha. Each
row translates the whole test set (sacreBLEU against the reference,
sentences/s: the SavedModel in calls of 64 sentences, as a server calls
it; CTranslate2 and our runner over it in one call, as each is given a
corpus), then the first `--single` sentences one at a time (sentences/s
at batch 1). Each speed is the faster of two passes
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
* `CTranslate2 float32 alone` / `CTranslate2 int8 alone`: the
  `export_ctranslate2` export run by CTranslate2 itself at its best, as its
  users run it (`comparison.peer_ctranslate2.translate_at_best`): the
  whole test set in one `translate_batch` call (CTranslate2 sorts and
  batches it), with the same beam and alpha (its own length penalty),
  for every `(inter_threads, intra_threads)` pair the cores allow (each in a
  process of its own) and every batching of `BATCHINGS` (examples or
  tokens); each speed is the fastest, printed with its setting, and the
  whole grid is printed below the table;
* `ours over CTranslate2 float32` / `... int8`: the same export through
  our runner, `CTranslate2Translator`, given the whole test set in one
  call as a corpus job gives it (its batches by length, of its
  `bulk_batch_size`, with our output limits; its `inter_threads`
  translators take a batch each at once), over the same grid, each speed
  the fastest, printed with its setting;
* `SavedModel int8 (Keras), session loader`: the model quantized by
  `keras.Model.quantize("int8")` (every matrix: the attention's and
  feed-forward projections, the embedding and its tied output
  projection), exported by `export_saved_model` and run as the float32
  row is (`--keras_int8 no` skips it; a failure is reported as the row's
  result).

Also printed: how many test sentences each row translates exactly as the
float32 SavedModel through the session loader does.
"""

import argparse
import json
import os
import time

from export_rows import grid_notes
from export_rows import grid_settings
from export_rows import run_at_best
from export_rows import speed
from script_workers import scratch_directory

from keras_transformer_runtime.text import files as text_files

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


def ct2_translate(directory, compute_type, threads, inter=1):
    """`translate(batch)` of the CTranslate2 export at `directory` with
    `inter` translators of `threads` intra-op threads."""
    from keras_transformer_runtime import CTranslate2Translator

    return CTranslate2Translator(
        directory, compute_type=compute_type, intra_threads=threads, inter_threads=inter
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


def export_keras_int8(run_dir, directory):
    """The run's model quantized by `model.quantize("int8")`, exported as
    a SavedModel at `directory`: the export's version directory."""
    from keras_transformer.export import export_saved_model

    model, tokenizer, config = load_run(run_dir)
    model.quantize("int8")
    return export_saved_model(run_translator(model, tokenizer, config), directory)


ROWS = {
    "SavedModel float32, session loader": ("saved_model", "session"),
    "SavedModel float32, tf.saved_model.load": ("saved_model", "load"),
    "CTranslate2 float32 alone": ("ct2_float32", "alone"),
    "CTranslate2 int8 alone": ("ct2_int8", "alone"),
    "ours over CTranslate2 float32": ("ct2_float32", "runner"),
    "ours over CTranslate2 int8": ("ct2_int8", "runner"),
    "SavedModel int8 (Keras), session loader": ("saved_model_int8", "session"),
}


def worker(row, path, work, single, threads, inter=1):
    """Runs one row (a `ROWS` key) on the sources in `work` (CTranslate2
    with `inter` x `threads` threads): writes its outputs and speeds to
    `work/result.json`."""
    _, how = ROWS[row]
    sources = text_files.read_lines(os.path.join(work, "sources.txt"))
    if how == "alone":
        result = ct2_alone(path, inter, threads, sources, single)
    else:
        # The served SavedModel takes a batch of 64 a call; our runner, the
        # whole set in one call, as a corpus job gives it (its own batches).
        if how in ("session", "load"):
            translate, call = saved_model_translate(path, how), 64
        else:
            translate, call = ct2_translate(path, "default", threads, inter), len(sources)
        outputs, batch_speed = timed(translate, sources, call)
        _, single_speed = timed(translate, sources[:single], 1)
        result = {"outputs": outputs, "batch": batch_speed, "single": single_speed}
    with open(os.path.join(work, "result.json"), "w") as f:
        json.dump(result, f)


def ct2_alone(path, inter, intra, sources, single):
    """`translate_at_best` of the CTranslate2 export at `path`, with the
    beam and alpha it was exported with."""
    from keras_transformer_runtime import CTranslate2Translator

    from comparison.peer_ctranslate2 import translate_at_best

    settings = CTranslate2Translator(path, intra_threads=1).settings
    return translate_at_best(
        path, "default", inter, intra, sources, settings.beam_size, settings.alpha, single
    )


def ct2_settings(row):
    """The settings `row` runs at (`export_rows`): CTranslate2 alone over
    its `(inter_threads, intra_threads)` grid, our runner over CTranslate2
    over the same grid (its `inter_threads` run a call's batches at once),
    the SavedModel as served (none)."""
    from comparison.peer_ctranslate2 import setting_name

    _, how = ROWS[row]
    return grid_settings(setting_name) if how in ("alone", "runner") else None


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
    parser.add_argument("--inter", type=int, default=1, help=argparse.SUPPRESS)
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
        help="also measure Keras's int8 quantization, exported as a SavedModel",
    )
    args = parsed(parser)
    if args.worker:
        return worker(args.worker, args.path, args.work, args.single, args.threads, args.inter)

    import sacrebleu

    from keras_transformer.export import export_ctranslate2
    from keras_transformer.export import export_saved_model

    sources, references = read_test_set(args)
    model, tokenizer, config = load_run(args.run_dir)
    translator = run_translator(model, tokenizer, config)
    work = scratch_directory("ct2_translation_")
    with open(os.path.join(work, "sources.txt"), "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in sources)
    paths = {"saved_model": export_saved_model(translator, os.path.join(work, "saved_model"))}
    if args.keras_int8 == "yes":
        paths["saved_model_int8"] = export_keras_int8(
            args.run_dir, os.path.join(work, "saved_model_int8")
        )
    for quantization in ("float32", "int8"):
        paths[f"ct2_{quantization}"] = os.path.join(work, f"ct2_{quantization}")
        export_ctranslate2(translator, paths[f"ct2_{quantization}"], quantization=quantization)

    print(
        f"{len(sources)} test sentences, beam {translator.settings.beam_size}, "
        f"alpha {translator.settings.alpha}, {os.cpu_count()} cores; "
        f"batch 1 on the first {args.single}"
    )
    print("| | BLEU | same as SavedModel | sentences/s, whole set | sentences/s, batch 1 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    baseline, notes = None, []
    for row, (path, _) in ROWS.items():
        if path not in paths:  # --keras_int8 no
            continue
        result = run_at_best(row, paths[path], work, args.single, __file__, ct2_settings(row))
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
        notes += grid_notes(row, result)
    print("\n".join(notes))


if __name__ == "__main__":
    main()

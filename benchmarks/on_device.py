"""Sizes, speeds and quality of the on-device exports of a trained model:
LiteRT (float32, float16, dynamic int8) and ONNX, against our SavedModel
and CTranslate2 int8.

    pip install -e ".[litert,onnx,ctranslate2]"
    python benchmarks/on_device.py --run_dir runs/multi30k \\
        --test_src data/multi30k/test_2016_flickr.en.gz \\
        --test_ref data/multi30k/test_2016_flickr.de.gz

`--run_dir` is a `model_dir` of `examples/wmt_ende.py` after its export
stage (the model is rebuilt as `ctranslate2_translation.py` rebuilds it),
decoded with its beam size and alpha. Each export is written from the same
weights, then each row runs in processes of its own: the whole test set
(sacreBLEU, sentences/s; the SavedModel in calls of 64 sentences as a
server calls it, each runner in one call, in its own batches of its
`bulk_batch_size`), then the first `--single` sentences one at a time
(sentences/s at batch 1); each speed is the faster of two passes after a
warm-up. Each runner runs at every setting of its threads, each in a
process of its own (`export_rows.fastest`); each speed is the fastest,
printed with its setting, and every setting's speeds are printed below
the table. The rows:

* `SavedModel float32`: `export_saved_model`, loaded by the TF1 session
  loader as TF Serving runs it (TF Serving's default session settings);
* `ours over CTranslate2 int8`: `export_ctranslate2(quantization="int8")`,
  `CTranslate2Translator`, over CTranslate2's `(inter_threads,
  intra_threads)` grid (`ctranslate2_translation.ct2_settings`);
* `LiteRT float32` / `float16` / `dynamic int8`: `export_litert`, run by
  `LiteRTTranslator` (the `ai-edge-litert` interpreter), at each
  `num_threads` of `thread_counts()`;
* `ONNX float32`: `export_onnx`, run by `ONNXTranslator` (ONNX Runtime),
  over the `(inter-op, intra-op)` thread pairs whose product the cores
  allow.

`size` is the model file (the SavedModel's `variables/` and graph; the
CTranslate2 `model.bin`), without the tokenizer. `same as Translator`
counts the test sentences each row translates exactly as
`keras_transformer.Translator` does in Python (beam search, and a greedy
LiteRT float32 export against greedy `Translator`).
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ctranslate2_translation import argument_parser  # noqa: E402
from ctranslate2_translation import ct2_translate  # noqa: E402
from ctranslate2_translation import load_run  # noqa: E402
from ctranslate2_translation import parsed  # noqa: E402
from ctranslate2_translation import read_test_set  # noqa: E402
from ctranslate2_translation import run_translator  # noqa: E402
from ctranslate2_translation import saved_model_translate  # noqa: E402
from ctranslate2_translation import timed  # noqa: E402
from export_rows import grid_notes  # noqa: E402
from export_rows import grid_settings  # noqa: E402
from export_rows import intra_settings  # noqa: E402
from export_rows import run_at_best  # noqa: E402
from export_rows import speed  # noqa: E402
from script_workers import scratch_directory  # noqa: E402

from keras_transformer_runtime.text.files import read_lines  # noqa: E402

BATCH = 64  # the SavedModel's sentences per call
# Row name: (export key, how the worker runs it).
ROWS = {
    "SavedModel float32": ("saved_model", "session"),
    "ours over CTranslate2 int8": ("ct2_int8", "ct2"),
    "LiteRT float32": ("litert_float32", "litert"),
    "LiteRT float16": ("litert_float16", "litert"),
    "LiteRT dynamic int8": ("litert_dynamic_int8", "litert"),
    "ONNX float32": ("onnx", "onnx"),
    "LiteRT float32, greedy": ("litert_greedy", "litert"),
}


def settings(row):
    """The settings `row` runs at (`export_rows`), or None (the SavedModel,
    as TF Serving runs it)."""
    from comparison.peer_ctranslate2 import setting_name

    return {
        "ct2": grid_settings(setting_name),
        "litert": intra_settings("num_threads"),
        "onnx": grid_settings(lambda inter, intra: f"inter-op {inter} x intra-op {intra}"),
    }.get(ROWS[row][1])


def runner_translate(path, how, threads, inter):
    """`translate(batch)` of a runner of CTranslate2 int8, LiteRT or ONNX
    with these threads (each runner's own batches)."""
    from keras_transformer_runtime import LiteRTTranslator
    from keras_transformer_runtime import ONNXTranslator

    if how == "ct2":
        return ct2_translate(path, "int8", threads, inter)
    if how == "litert":
        return LiteRTTranslator(path, num_threads=threads).translate
    return ONNXTranslator(path, num_threads=threads, inter_op_threads=inter).translate


def worker(row, path, work, single, threads, inter):
    """Runs one row on the sources in `work` with `inter` x `threads`
    threads (`settings`): writes its outputs and speeds to
    `work/result.json`."""
    _, how = ROWS[row]
    sources = read_lines(os.path.join(work, "sources.txt"))
    if how == "session":
        translate, call = saved_model_translate(path, "session"), BATCH
    else:
        translate, call = runner_translate(path, how, threads, inter), len(sources)
    outputs, batch_speed = timed(translate, sources, call)
    _, single_speed = timed(translate, sources[:single], 1)
    with open(os.path.join(work, "result.json"), "w") as f:
        json.dump({"outputs": outputs, "batch": batch_speed, "single": single_speed}, f)


def size_mb(path):
    """Megabytes of a model file, or of a directory's files (the tokenizer
    files of a CTranslate2 directory left out)."""
    if os.path.isfile(path):
        return os.path.getsize(path) / 1e6
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            if not name.endswith((".model", ".spm", ".json", "warmup_requests")):
                total += os.path.getsize(os.path.join(root, name))
    return total / 1e6


def export_all(translator, greedy, work):
    """Every row's export of the same weights: `{key: path}`."""
    from keras_transformer.export import export_ctranslate2
    from keras_transformer.export import export_litert
    from keras_transformer.export import export_onnx
    from keras_transformer.export import export_saved_model

    paths = {"saved_model": export_saved_model(translator, os.path.join(work, "saved_model"))}
    paths["ct2_int8"] = export_ctranslate2(
        translator, os.path.join(work, "ct2_int8"), quantization="int8"
    )
    for quantization in ("float32", "float16", "dynamic_int8"):
        paths[f"litert_{quantization}"] = export_litert(
            translator,
            os.path.join(work, f"ende_{quantization}.tflite"),
            quantization=None if quantization == "float32" else quantization,
        )
    paths["litert_greedy"] = export_litert(greedy, os.path.join(work, "ende_greedy.tflite"))
    paths["onnx"] = export_onnx(translator, os.path.join(work, "ende.onnx"))
    return paths


def main():
    args = parsed(argument_parser(__doc__, ROWS))
    if args.worker:
        return worker(args.worker, args.path, args.work, args.single, args.threads, args.inter)

    import sacrebleu

    sources, references = read_test_set(args)
    model, tokenizer, config = load_run(args.run_dir)
    translator = run_translator(model, tokenizer, config)
    greedy = run_translator(model, tokenizer, config, beam_size=1)
    beam, alpha = config["beam_size"], config["alpha"]
    reference_outputs = {
        "beam": translator.translate(sources, batch_size=64),
        "greedy": greedy.translate(sources, batch_size=64),
    }
    work = scratch_directory("on_device_")
    with open(os.path.join(work, "sources.txt"), "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in sources)
    paths = export_all(translator, greedy, work)

    float32_size = size_mb(paths["litert_float32"])
    print(
        f"{len(sources)} test sentences, beam {beam} (greedy where named), alpha {alpha}, "
        f"{os.cpu_count()} cores; batch 1 on the first {args.single}"
    )
    print(
        "| | size, MB | of LiteRT float32 | BLEU | same as Translator | "
        "sentences/s, whole set | sentences/s, batch 1 |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    notes = []
    for row, (key, _) in ROWS.items():
        size = size_mb(paths[key])
        result = run_at_best(row, paths[key], work, args.single, __file__, settings(row))
        if isinstance(result, str):
            print(f"| {row} | {size:.1f} | | {result} | | | |", flush=True)
            continue
        outputs = result["outputs"]
        bleu = sacrebleu.corpus_bleu(outputs, [references]).score
        expected = reference_outputs["greedy" if "greedy" in row else "beam"]
        same = sum(a == b for a, b in zip(outputs, expected, strict=True))
        print(
            f"| {row} | {size:.1f} | {size / float32_size:.1%} | {bleu:.2f} | "
            f"{same}/{len(sources)} | {speed(result, 'batch')} | {speed(result, 'single')} |",
            flush=True,
        )
        notes += grid_notes(row, result)
    print("\n".join(notes))


if __name__ == "__main__":
    main()

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
weights, then each row runs in a process of its own with every core: the
whole test set in batches of 16 (sacreBLEU, sentences/s), then the first
`--single` sentences one at a time (sentences/s at batch 1); each speed
is the faster of two passes after a warm-up batch. The rows:

* `SavedModel float32`: `export_saved_model`, loaded by the TF1 session
  loader as TF Serving runs it;
* `CTranslate2 int8` (at its fastest thread count, as in
  `ctranslate2_translation.py`): `export_ctranslate2(quantization="int8")`,
  `CTranslate2Translator`;
* `LiteRT float32` / `float16` / `dynamic int8`: `export_litert`, run by
  `LiteRTTranslator` (the `ai-edge-litert` interpreter);
* `ONNX float32`: `export_onnx`, run by `ONNXTranslator` (ONNX Runtime).

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
from ctranslate2_translation import run_any_row  # noqa: E402
from ctranslate2_translation import run_translator  # noqa: E402
from ctranslate2_translation import saved_model_translate  # noqa: E402
from ctranslate2_translation import speed  # noqa: E402
from ctranslate2_translation import timed  # noqa: E402
from script_workers import scratch_directory  # noqa: E402

from keras_transformer_runtime.text_files import read_lines  # noqa: E402

BATCH = 16
# Row name: (export key, how the worker runs it).
ROWS = {
    "SavedModel float32": ("saved_model", "session"),
    "CTranslate2 int8": ("ct2_int8", "ct2"),
    "LiteRT float32": ("litert_float32", "litert"),
    "LiteRT float16": ("litert_float16", "litert"),
    "LiteRT dynamic int8": ("litert_dynamic_int8", "litert"),
    "ONNX float32": ("onnx", "onnx"),
    "LiteRT float32, greedy": ("litert_greedy", "litert"),
}


def file_translate(path, how):
    """`translate(batch)` of a LiteRT or ONNX model file."""
    from keras_transformer_runtime import LiteRTTranslator
    from keras_transformer_runtime import ONNXTranslator

    translator = (LiteRTTranslator if how == "litert" else ONNXTranslator)(path)
    return lambda batch: translator.translate(batch, batch_size=len(batch))


def worker(row, path, work, single, threads):
    """Runs one row on the sources in `work` (CTranslate2 with `threads`
    intra-op threads): writes its outputs and speeds to
    `work/result.json`."""
    _, how = ROWS[row]
    if how == "session":
        translate = saved_model_translate(path, "session")
    elif how == "ct2":
        translate = ct2_translate(path, "int8", threads)
    else:
        translate = file_translate(path, how)
    sources = read_lines(os.path.join(work, "sources.txt"))
    outputs, batch_speed = timed(translate, sources, BATCH)
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
        return worker(args.worker, args.path, args.work, args.single, args.threads)

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
        f"| | size, MB | of LiteRT float32 | BLEU | same as Translator | "
        f"sentences/s, batch {BATCH} | sentences/s, batch 1 |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row, (key, _) in ROWS.items():
        size = size_mb(paths[key])
        result = run_any_row(row, paths[key], work, args.single, script=__file__)
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


if __name__ == "__main__":
    main()

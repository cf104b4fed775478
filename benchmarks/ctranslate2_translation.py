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
time (sentences/s at batch 1):

* `SavedModel float32, session loader`: `export_saved_model`, loaded by
  the TF1 session loader as TF Serving's C++ server loads and runs it
  (`serving_default`, TF Serving's default session settings); the
  baseline the other rows are compared with;
* `SavedModel float32, tf.saved_model.load`: the same export as a Python
  server runs it;
* `Translator int8 (Keras)`: the model's `Dense` layers quantized by
  `keras.Model.quantize("int8")` (embeddings stay float32), run by
  `Translator` in Python (the row is skipped with its reason if
  quantization or its SavedModel export fails);
* `CTranslate2 float32` / `CTranslate2 int8`: `export_ctranslate2`, then
  `CTranslate2Translator` with that compute type (`intra_threads` = all
  cores), with the same beam and alpha.

Also printed: how many test sentences each row translates exactly as the
float32 SavedModel through the session loader does.
"""

import argparse
import gzip
import json
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import sacrebleu  # noqa: E402

import keras_transformer as kt  # noqa: E402
from keras_transformer import training  # noqa: E402
from keras_transformer.export import export_ctranslate2  # noqa: E402
from keras_transformer.export import export_saved_model  # noqa: E402
from keras_transformer.tokenization import SentencePieceTokenizer  # noqa: E402
from keras_transformer_runtime import CTranslate2Translator  # noqa: E402

from comparison.served import signatures  # noqa: E402

MODEL_SETTINGS = (
    "num_layers",
    "d_model",
    "num_heads",
    "d_ff",
    "norm_first",
    "position_encoding",
    "max_length",
)


def read_lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def load_run(run_dir):
    """The run's `(model, tokenizer, config)`, with its exported weights."""
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
            for where in ("best", "checkpoints")
            if os.path.exists(os.path.join(run_dir, where, f"{name}.index"))
        ]
        if not found:
            raise SystemExit(f"{run_dir}: checkpoint {name} (export.json) not found")
        paths.append(found[0])
    training.average_checkpoints(model, paths)
    return model, tokenizer, config


def timed(translate, sources, batch_size):
    """`(outputs, sentences per second)` of `translate` over `sources` in
    batches of `batch_size`, after one untimed warm-up batch."""
    translate(sources[:batch_size])
    start = time.perf_counter()
    outputs = []
    for i in range(0, len(sources), batch_size):
        outputs += translate(sources[i : i + batch_size])
    return outputs, len(sources) / (time.perf_counter() - start)


def saved_model_translate(directory, loader):
    """`translate(batch)` through the SavedModel's `serving_default`,
    loaded by the TF1 session loader (`"session"`, TF Serving's) or by
    `tf.saved_model.load` (`"load"`)."""
    serve = signatures(directory, loader)("serving_default")

    def translate(batch):
        outputs = serve(text=np.array(batch, dtype=object))["translation"]
        return [t.decode("utf-8") for t in outputs]

    return translate


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run_dir", required=True)
    parser.add_argument("--test_src", required=True)
    parser.add_argument("--test_ref", required=True)
    parser.add_argument("--single", type=int, default=100, help="sentences timed at batch 1")
    parser.add_argument("--max_sentences", type=int, help="use only the first N test sentences")
    parser.add_argument(
        "--keras_int8",
        choices=("yes", "no"),
        default="yes",
        help="also measure Keras's int8 quantization (the slowest row)",
    )
    args = parser.parse_args()
    sources, references = read_lines(args.test_src), read_lines(args.test_ref)
    if args.max_sentences:
        sources, references = sources[: args.max_sentences], references[: args.max_sentences]
    model, tokenizer, config = load_run(args.run_dir)
    beam, alpha = config["beam_size"], config["alpha"]
    translator = kt.Translator(model, tokenizer, beam_size=beam, alpha=alpha)
    work = tempfile.mkdtemp(prefix="ct2_translation_")
    rows = {}

    export_saved_model(translator, os.path.join(work, "saved_model"), version=1)
    for loader, name in (("session", "session loader"), ("load", "tf.saved_model.load")):
        path = os.path.join(work, "saved_model", "1")
        rows[f"SavedModel float32, {name}"] = saved_model_translate(path, loader)
    for quantization in ("float32", "int8"):
        directory = os.path.join(work, f"ct2_{quantization}")
        export_ctranslate2(translator, directory, quantization=quantization)
        converted = CTranslate2Translator(directory, intra_threads=os.cpu_count())
        rows[f"CTranslate2 {quantization}"] = converted.translate
    skipped = {}
    try:
        if args.keras_int8 == "no":
            raise RuntimeError("--keras_int8 no")
        quantized = kt.Transformer.from_config(model.get_config())
        quantized.set_weights(model.get_weights())
        quantized.quantize("int8")
        rows["Translator int8 (Keras)"] = kt.Translator(
            quantized, tokenizer, beam_size=beam, alpha=alpha
        ).translate
    except Exception as error:  # noqa: BLE001 (report any failure as the row's result)
        skipped["Translator int8 (Keras)"] = f"{type(error).__name__}: {error}"

    print(
        f"{len(sources)} test sentences, beam {beam}, alpha {alpha}, "
        f"{os.cpu_count()} cores; batch 1 on the first {args.single}"
    )
    print("| | BLEU | same as SavedModel | sentences/s, batch 64 | sentences/s, batch 1 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    baseline = None
    for name, translate in rows.items():
        outputs, batch_speed = timed(translate, sources, 64)
        _, single_speed = timed(translate, sources[: args.single], 1)
        baseline = baseline or outputs
        bleu = sacrebleu.corpus_bleu(outputs, [references]).score
        same = sum(a == b for a, b in zip(outputs, baseline, strict=True))
        print(
            f"| {name} | {bleu:.2f} | {same}/{len(sources)} | {batch_speed:.1f} | "
            f"{single_speed:.1f} |",
            flush=True,
        )
    for name, reason in skipped.items():
        print(f"| {name} | skipped: {reason} | | | |")


if __name__ == "__main__":
    main()

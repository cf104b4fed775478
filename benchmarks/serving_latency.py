"""Latency of an exported translator through the loaded SavedModel.

    python benchmarks/serving_latency.py [--presets tiny base]

For each preset (random weights, a SentencePiece vocabulary trained on a
generated corpus, beam 4, alpha 0.6, source length + 50), it exports with
`export_saved_model`, loads the SavedModel with each of `--loaders`
(`session`: the TF1 session loader, as TF Serving's C++ server loads and
runs it; `load`: `tf.saved_model.load`, as a Python server would), and
times each signature in `--signatures` on one sentence and on a batch of
64 (median of `--repeats` calls after a warm-up call), with its cost
relative to `serving_default`. With random weights EOS is almost never chosen, so every
output runs to its length limit (source + 50 tokens): these are worst-case
latencies. The inputs: `translate_with_options` forces the first three
words of each sentence as a prefix; `score` scores each sentence as its
own translation; `sample` draws with seed 0.
"""

import argparse
import os
import statistics
import subprocess
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from keras_transformer import Transformer  # noqa: E402
from keras_transformer import Translator  # noqa: E402
from keras_transformer.export import export_saved_model  # noqa: E402
from keras_transformer.tokenization import train_sentencepiece  # noqa: E402

from comparison.measure import time_calls  # noqa: E402
from comparison.served import signatures  # noqa: E402


def corpus(n, rng):
    words = [
        "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), rng.integers(2, 9)))
        for _ in range(3000)
    ]
    return [" ".join(rng.choice(words, rng.integers(8, 20))) for _ in range(n)]


SIGNATURES = (
    "serving_default",
    "n_best",
    "translate_with_options",
    "translate_with_alignments",
    "sample",
    "score",
)


def inputs_for(signature, sentences):
    """The request each signature is timed with, as numpy arrays."""
    text = np.array([s.encode() for s in sentences], dtype=object)
    if signature == "translate_with_options":
        prefix = np.array([" ".join(s.split()[:3]).encode() for s in sentences], dtype=object)
        return {"text": text, "prefix": prefix, "max_output_length": np.int32(0)}
    if signature == "sample":
        return {"text": text, "seed": np.int64(0)}
    if signature == "score":
        return {"source": text, "target": text}
    return {"text": text}


def median_seconds(serve, inputs, repeats):
    """Median seconds of one call of `serve` on `inputs`, after one
    untimed call."""
    return statistics.median(time_calls(lambda: serve(**inputs), 1, repeats))


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--presets", nargs="+", default=["tiny", "base"])
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--signatures", nargs="+", default=list(SIGNATURES), choices=SIGNATURES)
    loaders = ("session", "load")
    parser.add_argument("--loaders", nargs="+", default=list(loaders), choices=loaders)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    texts = corpus(20000, rng)
    tokenizer = train_sentencepiece(texts, args.vocab_size)
    sentences = texts[:64]
    source_tokens = np.mean([len(t) for t in tokenizer(sentences).to_list()])
    print(
        f"vocabulary {tokenizer.vocab_size}, mean source length {source_tokens:.1f} tokens, beam 4"
    )
    print(
        "| preset | export size | loader | signature | 1 sentence (s) | 64 sentences (s) "
        "| sentences/s at 64 | vs serving_default (1 / 64) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for preset in args.presets:
        model = Transformer.from_preset(preset, vocab_size=tokenizer.vocab_size)
        with tempfile.TemporaryDirectory() as tmp:
            path = export_saved_model(Translator(model, tokenizer), tmp, warmup_sentences=())
            size = subprocess.run(
                ["du", "-sh", path], capture_output=True, text=True
            ).stdout.split()[0]
            for loader in args.loaders:
                signature = signatures(path, loader)
                baseline = None
                for name in args.signatures:
                    serve = signature(name)
                    one = median_seconds(serve, inputs_for(name, sentences[:1]), args.repeats)
                    batch = median_seconds(serve, inputs_for(name, sentences), args.repeats)
                    if name == "serving_default":
                        baseline = (one, batch)
                    relative = (
                        f"{one / baseline[0]:.2f}x / {batch / baseline[1]:.2f}x"
                        if baseline
                        else "–"
                    )
                    print(
                        f"| {preset} | {size} | {loader} | {name} | {one:.3f} | {batch:.2f} "
                        f"| {64 / batch:.1f} | {relative} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()

"""Latency of an exported translator through the loaded SavedModel.

    python benchmarks/serving_latency.py [--presets tiny base]

For each preset (random weights, a SentencePiece vocabulary trained on a
generated corpus, beam 4, alpha 0.6, source length + 50), it exports with
`export_saved_model`, loads the SavedModel with `tf.saved_model.load` (as a
Python server would; TF Serving runs the same graph), and times the
`serving_default` signature on one sentence and on a batch of 64 (median of
`--repeats` calls after a warm-up call). With random weights EOS is almost
never chosen, so every output runs to its length limit (source + 50
tokens): these are worst-case latencies.
"""

import argparse
import os
import statistics
import subprocess
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_transformer import Transformer  # noqa: E402
from keras_transformer import Translator  # noqa: E402
from keras_transformer.export import export_saved_model  # noqa: E402
from keras_transformer.tokenization import train_sentencepiece  # noqa: E402

from comparison.measure import time_calls  # noqa: E402


def corpus(n, rng):
    words = [
        "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), rng.integers(2, 9)))
        for _ in range(3000)
    ]
    return [" ".join(rng.choice(words, rng.integers(8, 20))) for _ in range(n)]


def median_seconds(serve, sentences, repeats):
    """Median seconds of one call of `serve` on `sentences`, after one
    untimed call."""
    text = tf.constant(sentences)
    return statistics.median(time_calls(lambda: serve(text=text), 1, repeats))


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--presets", nargs="+", default=["tiny", "base"])
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    texts = corpus(20000, rng)
    tokenizer = train_sentencepiece(texts, args.vocab_size)
    sentences = texts[:64]
    source_tokens = np.mean([len(t) for t in tokenizer(sentences).to_list()])
    print(
        f"vocabulary {tokenizer.vocab_size}, mean source length {source_tokens:.1f} tokens, beam 4"
    )
    print("| preset | export size | 1 sentence (s) | 64 sentences (s) | sentences/s at 64 |")
    print("| --- | --- | --- | --- | --- |")
    for preset in args.presets:
        model = Transformer.from_preset(preset, vocab_size=tokenizer.vocab_size)
        with tempfile.TemporaryDirectory() as tmp:
            path = export_saved_model(Translator(model, tokenizer), tmp, warmup_sentences=())
            size = subprocess.run(
                ["du", "-sh", path], capture_output=True, text=True
            ).stdout.split()[0]
            serve = tf.saved_model.load(path).signatures["serving_default"]
            one = median_seconds(serve, sentences[:1], args.repeats)
            batch = median_seconds(serve, sentences, args.repeats)
        print(f"| {preset} | {size} | {one:.3f} | {batch:.2f} | {64 / batch:.1f} |", flush=True)


if __name__ == "__main__":
    main()

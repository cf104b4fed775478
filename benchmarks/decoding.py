"""Generated tokens per second of greedy and beam-4 search.

    python benchmarks/decoding.py [--presets tiny base] [--length 24]

For each preset (random weights, vocabulary 8,000), batch 1 and 64, greedy
and beam 4, it times:

* cached: `Transformer.decode_step` with the fixed-shape key/value cache
  (what `Translator` uses);
* uncached: every step re-runs the decoder over the whole fixed-length
  prefix buffer (causal masking hides the unwritten positions), the
  straightforward way to decode without a cache;

each as a `tf.function` ("graph") and under XLA (`jit_compile=True`).
Sources have `--length` tokens and every sentence generates exactly
`--length` tokens (EOS is forbidden before the last step), so all rows do
the same work. Tokens/s counts output tokens (batch x length), median of
`--repeats` timed runs after one warm-up run (which compiles). The last
column is the ratio to the first row measured of the same preset, search
and batch: the uncached graph run, unless `--caches` or `--compiles` leave
it out.
"""

import argparse
import os
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_transformer import Transformer  # noqa: E402
from keras_transformer.decoding import beam_search  # noqa: E402
from keras_transformer.decoding import greedy_search  # noqa: E402
from keras_transformer.special_ids import EOS_ID  # noqa: E402
from keras_transformer.special_ids import NUM_SPECIAL_IDS  # noqa: E402
from keras_transformer.special_ids import PAD_ID  # noqa: E402

from comparison.measure import time_calls  # noqa: E402
from comparison.workload import forced_length  # noqa: E402

VOCAB = 8000


def make_decoder(model, search, cached, length):
    def run(source):
        batch = tf.shape(source)[0]
        mask = tf.not_equal(source, PAD_ID)
        encoder_output = model.encode(source)
        if cached:
            cache = model.init_cache(encoder_output, mask, max_length=length)

            def step(ids, cache, index):
                logits, cache = model.decode_step(ids, cache, index)
                return logits[:, -1], cache

        else:
            # The prefix belongs to a hypothesis; the encoder output is
            # repeated per row too, as a decoder without a cache sees it.
            cache = {
                "per_hypothesis": {
                    "prefix": tf.zeros([batch, length], tf.int32),
                    "encoder_output": encoder_output,
                    "mask": mask,
                },
                "per_sentence": {},
            }

            def step(ids, cache, index):
                state = cache["per_hypothesis"]
                column = tf.equal(tf.range(length), index)[None]
                prefix = tf.where(column, ids, state["prefix"])  # write the token at index
                logits = model.decode(prefix, state["encoder_output"], state["mask"])
                logits = tf.gather(logits, index, axis=1)  # (n, vocab) at this position
                return logits, {**cache, "per_hypothesis": {**state, "prefix": prefix}}

        step = forced_length(step, length, EOS_ID)
        grow = dict(resize_cache=model.resize_cache) if cached else {}  # as `Translator` does
        if search == "greedy":
            ids, _ = greedy_search(step, cache, batch, length, **grow)
        else:
            ids, _ = beam_search(step, cache, batch, length, beam_size=4, **grow)
        return ids

    return run


def measure(fn, source, repeats):
    """Median seconds of `fn(source)` after one call that compiles."""
    return statistics.median(time_calls(lambda: fn(source).numpy(), 1, repeats))


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--presets", nargs="+", default=["tiny", "base"])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 64])
    parser.add_argument("--length", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--caches", nargs="+", choices=("uncached", "cached"), default=["uncached", "cached"]
    )
    parser.add_argument("--compiles", nargs="+", choices=("graph", "XLA"), default=["graph", "XLA"])
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    print("| preset | search | batch | cache | compile | tokens/s | vs uncached graph |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for preset in args.presets:
        model = Transformer.from_preset(preset, vocab_size=VOCAB, max_length=max(256, args.length))
        for search in ("greedy", "beam4"):
            for batch in args.batches:
                source = tf.constant(
                    rng.integers(NUM_SPECIAL_IDS, VOCAB, (batch, args.length)), tf.int32
                )
                baseline = None
                for cached in (c == "cached" for c in args.caches):
                    for jit in (c == "XLA" for c in args.compiles):
                        fn = tf.function(
                            make_decoder(model, search, cached, args.length), jit_compile=jit
                        )
                        seconds = measure(fn, source, args.repeats)
                        tokens_per_sec = batch * args.length / seconds
                        baseline = baseline or tokens_per_sec
                        cache = "cached" if cached else "uncached"
                        compile_ = "XLA" if jit else "graph"
                        print(
                            f"| {preset} | {search} | {batch} | {cache} | {compile_} "
                            f"| {tokens_per_sec:,.0f} | {tokens_per_sec / baseline:.2f}x |",
                            flush=True,
                        )


if __name__ == "__main__":
    main()

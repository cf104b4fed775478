"""The batch shapes of `make_batches`, dynamic against static, and what
they cost a training step compiled by XLA: `training_input.py --shapes`
and `--xla_steps N` (its module docstring says what each prints).

A WMT-like corpus is made of the given one: whole pairs concatenated until
the source reaches a length drawn from a log-normal (median 16 words,
sigma 0.65: with the overshoot of the last pair, about WMT14 English's
lengths, a median near 22 words and a tail past 100), so its lengths
are long-tailed as news text is, while its words stay the corpus's.
"""

import glob
import json
import os
import time

import numpy as np

from keras_transformer import training

DYNAMIC, STATIC = "dynamic", "static"
# XLA writes each module it compiles here (one per compile of the step).
DUMP = "--xla_dump_to={} --xla_dump_hlo_module_re=.*one_step_on_data.*"


def wmt_like_pairs(sources, targets, count, seed=0, median_words=16, sigma=0.65):
    """`count` pairs, each whole pairs of `sources`/`targets` joined by
    spaces until the source has at least a log-normal draw of words."""
    rng = np.random.default_rng(seed)
    words = np.array([len(s.split()) for s in sources])
    wanted = rng.lognormal(np.log(median_words), sigma, count)
    joined_sources, joined_targets = [], []
    for length in wanted:
        picked, total = [], 0
        while total < length:
            picked.append(int(rng.integers(len(sources))))
            total += words[picked[-1]]
        joined_sources.append(" ".join(sources[i] for i in picked))
        joined_targets.append(" ".join(targets[i] for i in picked))
    return joined_sources, joined_targets


def length_summary(sources):
    """Median, mean and 99th percentile of the sources' words."""
    words = np.array([len(s.split()) for s in sources])
    return (
        f"median {np.median(words):.0f}, mean {words.mean():.1f}, "
        f"99th percentile {np.percentile(words, 99):.0f} words"
    )


def batches(pairs, tokenizer, batch_tokens, max_length, kind, max_shapes=24, seed=0):
    """`make_batches` as `examples/wmt_ende.py` calls it (tokenized once,
    repeated), with dynamic or static shapes."""
    return training.make_batches(
        pairs,
        tokenizer,
        batch_tokens,
        max_length=max_length,
        seed=seed,
        cache_ids=True,
        repeat=True,
        static_shapes=kind == STATIC,
        max_shapes=max_shapes,
    )


def shape_row(pairs, tokenizer, batch_tokens, max_length, kind, count, max_shapes=24):
    """Distinct shapes in the first 1,000 and the first `count` batches,
    real target tokens per batch, padding shares of each side."""
    first, seen = set(), set()
    real, positions, target_tokens = np.zeros(2), np.zeros(2), 0
    data = batches(pairs, tokenizer, batch_tokens, max_length, kind, max_shapes)
    for index, ((source, _), target) in enumerate(data.dataset.take(count).as_numpy_iterator()):
        seen.add((source.shape, target.shape))
        if index < 1000:
            first.add((source.shape, target.shape))
        for side, ids in enumerate((source, target)):
            real[side] += np.count_nonzero(ids)
            positions[side] += ids.size
        target_tokens += np.count_nonzero(target)
    padding = 1 - real / positions
    return {
        "kind": kind,
        "shapes_first_1000": len(first),
        "shapes": len(seen),
        "batches": count,
        "target_tokens_per_batch": target_tokens / count,
        "source_padding": float(padding[0]),
        "target_padding": float(padding[1]),
    }


def print_shape_table(rows):
    """The `--shapes` table, each static row against the dynamic one."""
    print(
        "| corpus | batches | shapes, first 1,000 | shapes, all | real target tokens per batch "
        "| vs dynamic | source padding | target padding |\n| --- | --- | ---: | ---: | ---: "
        "| ---: | ---: | ---: |"
    )
    dynamic = {}
    for corpus, row in rows:
        if row["kind"] == DYNAMIC:
            dynamic[corpus] = row["target_tokens_per_batch"]
        ratio = row["target_tokens_per_batch"] / dynamic[corpus]
        print(
            f"| {corpus} | {row['kind']} | {row['shapes_first_1000']} | {row['shapes']} "
            f"(in {row['batches']:,}) | {row['target_tokens_per_batch']:,.0f} | {ratio:.3f} "
            f"| {100 * row['source_padding']:.1f}% | {100 * row['target_padding']:.1f}% |"
        )


def xla_dump_environment(directory):
    """The environment of a worker whose XLA compiles are counted."""
    return {"XLA_FLAGS": DUMP.format(directory)}


def compiles(directory=None):
    """How many times XLA compiled the training step in a process run with
    `xla_dump_environment(directory)` (default: this process's): one module
    dump per compile."""
    if directory is None:
        directory = os.environ["XLA_FLAGS"].split()[0].split("=", 1)[1]
    return len(glob.glob(os.path.join(directory, "*one_step_on_data*before_optimizations.txt")))


def xla_steps_row(model, data, steps):
    """Trains `model` (compiled with `jit_compile=True`) on `steps` batches
    of `data`: wall time (tracing and every compile included), compiles,
    real target tokens per second."""
    start = time.perf_counter()
    history = model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "compiles": compiles(),
        # `TokenCount` sums the epoch's real target tokens.
        "target_tokens_per_sec": history.history["tokens"][-1] / seconds,
    }


def print_xla_table(rows, steps):
    print(
        f"| batches | wall time of the first {steps:,} steps | XLA compiles | real target "
        "tokens/s (compiles included) |\n| --- | ---: | ---: | ---: |"
    )
    for kind, row in rows:
        print(
            f"| {kind} | {row['seconds'] / 60:.1f} min | {row['compiles']} "
            f"| {row['target_tokens_per_sec']:,.0f} |"
        )
    print(json.dumps(dict(rows)))

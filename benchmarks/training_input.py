"""Training throughput on a real corpus against the model's own step.

    python benchmarks/training_input.py --train_src data/multi30k/train.en.gz \\
        --train_tgt data/multi30k/train.de.gz --batch_tokens 1024

Measures, in one process on one machine, the target tokens per second of
the same model (the `small` model preset, the `wmt_ende.py` small run's
shape) trained in these ways (five rows):

1. `fixed`: one batch of `batch_tokens / 32` sentences of exactly 32
   source and 32 target tokens, fed again and again (`compare.py`'s
   training row, at this batch size): the model's own speed;
2. `pipeline`: the corpus through `make_batches` (tokenized once, length
   buckets of each side, as under `repeat=True`) into `model.fit`: adds
   padding and varying shapes; `pipeline, longer-side buckets`: the same
   with `bucket_by="longer_side"` (each side pads to the other's lengths);
3. `train`: the same batches through `training.train`, as
   `examples/wmt_ende.py` runs it: adds checkpoints, the time budget's
   callbacks, the progress bar and TensorBoard;
4. `train, ids retokenized`: as 3 without `cache_ids` (the corpus
   tokenized again on every pass).

Tokens are real (non-padding) target tokens; rows 2-4 count every
second of their wall time after `--warmup` steps (tracing excluded).
Also printed: the padding share of the batches (each side, both
bucketings) and their real target tokens.

    python benchmarks/training_input.py --train_src ... --train_tgt ... --shapes

The batches' shapes instead: for the corpus (at `--batch_tokens`, max
length 128) and a WMT-like corpus made of it (`training_shapes.py`; 4,096
tokens, max length 256, as the base run), dynamic shapes (each batch padded
to its longest, buckets of each side: the default on a CPU) against static
ones (`static_shapes=True`, 24 shapes: the default on a GPU): distinct
shapes in the first 1,000 and in `--shape_batches` batches, real target
tokens per batch, padding of each side.

    python benchmarks/training_input.py --train_src ... --train_tgt ... --xla_steps 2000

The first `--xla_steps` steps of the `small` model compiled by XLA
(`jit_compile=True`, as on a GPU) on the corpus, dynamic against static
shapes, each in its own process: wall time (every compile included), how
many times XLA compiled the step (its module dumps counted) and real
target tokens per second.
"""

import argparse
import json
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import training_shapes  # noqa: E402
from script_workers import run_worker  # noqa: E402
from script_workers import scratch_directory  # noqa: E402

import keras_transformer as kt  # noqa: E402
from keras_transformer import training  # noqa: E402
from keras_transformer.training.devices import MIXED_PRECISION


class StepTimes(keras.callbacks.Callback):
    """Wall time and real target tokens after the first `warmup` steps."""

    def __init__(self, warmup):
        super().__init__()
        self.warmup, self.batches, self.start, self.tokens = warmup, 0, None, 0.0

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1
        if self.batches == self.warmup:
            self.start, self.tokens = time.perf_counter(), 0.0
        elif self.batches > self.warmup:
            self.tokens += self.batch_tokens

    def rate(self):
        return self.tokens / (time.perf_counter() - self.start)


class CountTokens(keras.callbacks.Callback):
    """Feeds `StepTimes` the real tokens of each batch from the
    `TokenCount` metric (logged as the running sum `tokens`)."""

    def __init__(self, times):
        super().__init__()
        self.times, self.last = times, 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self.last = 0.0

    def on_train_batch_end(self, batch, logs=None):
        total = float(logs["tokens"])
        self.times.batch_tokens, self.last = total - self.last, total


def model(tokenizer, precision):
    return kt.Transformer.from_preset(
        "small",
        vocab_size=tokenizer.vocab_size,
        pad_id=tokenizer.pad_id,
        norm_first=True,
        max_length=128,
        dtype=training.dtype_policy(precision),
        seed=0,
    )


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--train_src", required=True)
    parser.add_argument("--train_tgt", required=True)
    parser.add_argument("--batch_tokens", type=int, default=1024)
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--precision", default="auto", choices=("auto", *MIXED_PRECISION))
    parser.add_argument("--steps", type=int, default=300, help="timed steps per row")
    parser.add_argument("--warmup", type=int, default=30, help="untimed steps first")
    parser.add_argument("--shapes", action="store_true", help="the batch shapes instead")
    parser.add_argument("--shape_batches", type=int, default=5000, help="batches of --shapes")
    parser.add_argument("--wmt_pairs", type=int, default=200_000, help="WMT-like pairs")
    parser.add_argument("--xla_steps", type=int, help="the first steps under XLA instead")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer", help=argparse.SUPPRESS)
    args = parser.parse_args()
    precision = args.precision
    if precision == "auto":
        precision = training.recommended_mixed_precision()

    pairs = training.text_pairs_from_files(args.train_src, args.train_tgt)
    if args.worker:
        tokenizer = kt.tokenization.SentencePieceTokenizer.from_file(args.tokenizer)
        return xla_worker(args, pairs, tokenizer, precision)
    sample = [
        (s.decode(), t.decode())
        for sources, targets in pairs.take(100_000).batch(4096).as_numpy_iterator()
        for s, t in zip(sources, targets, strict=True)
    ]
    tokenizer = kt.tokenization.train_sentencepiece(sample, args.vocab_size, seed=0)
    if args.shapes:
        return shapes(args, pairs, sample, tokenizer)
    if args.xla_steps:
        return xla_steps(args, tokenizer, precision)

    def batches(cache_ids=True, bucket_by="auto"):
        return training.make_batches(
            pairs,
            tokenizer,
            args.batch_tokens,
            max_length=128,
            seed=0,
            cache_ids=cache_ids,
            repeat=True,  # as the example: no part-filled batch at the end of a pass
            bucket_by=bucket_by,
        )

    measured = 200

    def padding(bucket_by):
        """Padding shares of the source and target positions, real target
        tokens per batch."""
        real, positions = np.zeros(2), np.zeros(2)
        for (source, _), target in batches(bucket_by=bucket_by).dataset.take(measured):
            for side, ids in enumerate((source, target)):
                real[side] += int(tf.math.count_nonzero(ids))
                positions[side] += int(tf.size(ids))
        return 1 - real / positions, real[1] / measured

    (source_pad, target_pad), real = padding("auto")
    (longer_source_pad, longer_target_pad), _ = padding("longer_side")
    rows = []
    steps = args.warmup + args.steps

    rng = np.random.default_rng(0)
    sentences = args.batch_tokens // 32
    ids = rng.integers(4, tokenizer.vocab_size, (sentences, 33)).astype("int32")
    fixed = tf.data.Dataset.from_tensors(((ids[:, :-1], ids[:, :-1]), ids[:, 1:])).repeat()
    for name, data in (
        ("fixed", fixed),
        ("pipeline", batches().dataset),
        ("pipeline, longer-side buckets", batches(bucket_by="longer_side").dataset),
    ):
        net = training.compile_for_training(
            model(tokenizer, precision), training.TrainingSettings(warmup_steps=800)
        )
        times = StepTimes(args.warmup)
        net.fit(data, steps_per_epoch=steps, epochs=1, verbose=0,
                callbacks=[CountTokens(times), times])  # fmt: skip
        rows.append((name, times.rate()))

    for name, cache_ids in (("train", True), ("train, ids retokenized", False)):
        times = StepTimes(args.warmup)
        with tempfile.TemporaryDirectory() as model_dir:
            training.train(
                model(tokenizer, precision),
                batches(cache_ids),
                model_dir,
                training.TrainingSettings(
                    train_steps=steps,
                    steps_per_checkpoint=100,
                    warmup_steps=800,
                    budget=training.TimeBudget(3600),
                    verbose=2,
                ),
                callbacks=[CountTokens(times), times],
            )
        rows.append((name, times.rate()))

    print(
        f"\nsmall model preset (pre-norm), {precision}, {args.batch_tokens:,} tokens per batch; "
        f"corpus batches: padding {100 * source_pad:.1f}% of the source and "
        f"{100 * target_pad:.1f}% of the target positions ({100 * longer_source_pad:.1f}% and "
        f"{100 * longer_target_pad:.1f}% with longer-side buckets), {real:,.0f} real target "
        f"tokens per batch; {args.steps} steps after {args.warmup}\n"
    )
    print("| how | target tokens/s | vs fixed |\n| --- | --- | --- |")
    for name, rate in rows:
        print(f"| {name} | {rate:,.0f} | {rate / rows[0][1]:.2f} |")


def shapes(args, pairs, sample, tokenizer):
    """`--shapes`: the corpus and a WMT-like one, dynamic and static."""
    sources, targets = zip(*sample, strict=True)
    wmt = training_shapes.wmt_like_pairs(sources, targets, args.wmt_pairs)
    print(f"WMT-like corpus: {args.wmt_pairs:,} pairs, {training_shapes.length_summary(wmt[0])}")
    print(f"the corpus: {training_shapes.length_summary(sources)}\n")
    corpora = (
        ("the corpus", pairs, args.batch_tokens, 128),
        ("WMT-like", training.text_pairs_from_lists(*wmt), 4096, 256),
    )
    rows = []
    for corpus, corpus_pairs, batch_tokens, max_length in corpora:
        for kind in (training_shapes.DYNAMIC, training_shapes.STATIC):
            row = training_shapes.shape_row(
                corpus_pairs, tokenizer, batch_tokens, max_length, kind, args.shape_batches
            )
            rows.append((f"{corpus}, {batch_tokens:,} tokens", row))
    training_shapes.print_shape_table(rows)


def xla_steps(args, tokenizer, precision):
    """`--xla_steps`: a worker per kind of shapes."""
    work = scratch_directory("training_input_")
    path = os.path.join(work, "spm.model")
    tokenizer.save(path)
    rows = []
    for kind in (training_shapes.DYNAMIC, training_shapes.STATIC):
        dump = os.path.join(work, kind)
        arguments = ["--train_src", args.train_src, "--train_tgt", args.train_tgt]
        arguments += ["--tokenizer", path, "--batch_tokens", str(args.batch_tokens)]
        arguments += ["--xla_steps", str(args.xla_steps), "--precision", precision]
        environment = training_shapes.xla_dump_environment(dump)
        rows.append((kind, run_worker(__file__, kind, arguments, environment)))
        print(kind, rows[-1], flush=True)
    print(
        f"\nsmall model preset (pre-norm), {precision}, jit_compile=True, "
        f"{args.batch_tokens:,} tokens per batch\n"
    )
    training_shapes.print_xla_table(rows, args.xla_steps)


def xla_worker(args, pairs, tokenizer, precision):
    """One row of `--xla_steps`: its kind is `--worker`."""
    data = training_shapes.batches(pairs, tokenizer, args.batch_tokens, 128, args.worker)
    net = model(tokenizer, precision)
    training.compile_for_training(
        net, training.TrainingSettings(warmup_steps=800, jit_compile=True)
    )
    row = training_shapes.xla_steps_row(net, data.dataset, args.xla_steps)
    print(json.dumps(row))


if __name__ == "__main__":
    main()

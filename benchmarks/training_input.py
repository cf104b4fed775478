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
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_transformer as kt  # noqa: E402
from keras_transformer import training  # noqa: E402


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
    parser.add_argument("--precision", default="auto", choices=("auto", *training.MIXED_PRECISION))
    parser.add_argument("--steps", type=int, default=300, help="timed steps per row")
    parser.add_argument("--warmup", type=int, default=30, help="untimed steps first")
    args = parser.parse_args()
    precision = args.precision
    if precision == "auto":
        precision = training.recommended_mixed_precision()

    pairs = training.text_pairs_from_files(args.train_src, args.train_tgt)
    sample = [
        (s.decode(), t.decode())
        for sources, targets in pairs.take(100_000).batch(4096).as_numpy_iterator()
        for s, t in zip(sources, targets, strict=True)
    ]
    tokenizer = kt.tokenization.train_sentencepiece(sample, args.vocab_size, seed=0)

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
        for (source, _), target in batches(bucket_by=bucket_by).take(measured):
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
        ("pipeline", batches()),
        ("pipeline, longer-side buckets", batches(bucket_by="longer_side")),
    ):
        net = training.compile_for_training(model(tokenizer, precision), warmup_steps=800)
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
                train_steps=steps,
                steps_per_checkpoint=100,
                warmup_steps=800,
                budget=training.TimeBudget(3600),
                verbose=2,
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


if __name__ == "__main__":
    main()

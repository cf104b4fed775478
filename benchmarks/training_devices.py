"""Training step time and tokens/s: one device vs. MirroredStrategy over two
logical CPU devices, each in a fresh process, same global batch.

    python benchmarks/training_devices.py [--preset tiny] [--steps 20]

Prints a table (median step over the timed steps, warm-up excluded) and the
ratio against the one-device run measured in the same invocation. On a CPU
the two logical devices share the same cores, so this measures the cost of
the strategy's machinery (replication, all-reduce), not a speed-up.
"""

import argparse
import json
import os
import statistics
import sys
import time

from script_workers import run_worker


def worker(mode, preset, steps, batch, length, vocab):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    if mode == "mirrored":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
    import keras
    import numpy as np

    from keras_transformer import Transformer
    from keras_transformer import training

    strategy = (
        tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        if mode == "mirrored"
        else tf.distribute.get_strategy()
    )
    rng = np.random.default_rng(0)
    source = rng.integers(4, vocab, (batch, length)).astype("int32")
    target = rng.integers(4, vocab, (batch, length)).astype("int32")
    data = tf.data.Dataset.from_tensors(((source, target), target)).repeat()
    with strategy.scope():
        model = Transformer.from_preset(preset, vocab_size=vocab)
        model.compile(
            optimizer=training.paper_optimizer(model.d_model),
            loss=training.LabelSmoothedCrossEntropy(),
        )

    times = []

    class Timer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self.start)

    warmup = 3
    model.fit(data, epochs=1, steps_per_epoch=warmup + steps, callbacks=[Timer()], verbose=0)
    step = statistics.median(times[warmup:])
    return {
        "mode": mode,
        "replicas": strategy.num_replicas_in_sync,
        "step_ms": 1000 * step,
        "tokens_per_sec": batch * length / step,
    }


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(
            json.dumps(
                worker(args.worker, args.preset, args.steps, args.batch, args.length, args.vocab)
            )
        )
        return
    rows = [run_worker(__file__, mode, sys.argv[1:]) for mode in ("one_device", "mirrored")]
    base = rows[0]["tokens_per_sec"]
    print(
        f"preset {args.preset}, global batch {args.batch} x {args.length} target tokens, "
        f"median of {args.steps} steps"
    )
    print("| strategy | replicas | step (ms) | target tokens/s | vs one device |")
    print("| --- | --- | --- | --- | --- |")
    for row in rows:
        rate = row["tokens_per_sec"]
        print(
            f"| {row['mode']} | {row['replicas']} | {row['step_ms']:.1f} | {rate:,.0f} "
            f"| {rate / base:.2f}x |"
        )


if __name__ == "__main__":
    main()

"""Forward and backward through one attention layer: ours against Keras's own.

    python benchmarks/attention.py [--rounds 5] [--steps 200]

One training step of one layer at the `small` preset's shapes (batch 48,
length 21, d_model 256, 4 heads): the output, and the gradients of a sum
of it with respect to the inputs and every weight, in a `tf.function`.
Two cases: causal self-attention, and attention over a padded memory (a
`value_mask`). Rows:

* `keras_transformer`: `keras_transformer.layers.MultiHeadAttention`;
* `keras`: `keras.layers.MultiHeadAttention`, the same weights;
* with `--baseline CHECKOUT`, `baseline`: the package's layer as another
  checkout of this repository has it (e.g. `git worktree add /tmp/old
  HEAD~3`), to measure a change against its parent in one run.

Each row runs in its own process; the rounds alternate the rows, so that
the machine's drift falls on both. A row's time is the median over its
rounds of each round's median step time (`--steps` timed steps after
`--warmup`); "speed vs Keras's" is Keras's median over its median, and
"paired" the median over the rounds of Keras's time over its time in the
same round (the machine's drift between rounds cancels).
"""

import argparse
import os
import statistics
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

ROWS = ("keras_transformer", "keras", "baseline")
CASES = ("causal self-attention", "memory with padding")
SHAPE = dict(batch=48, length=21, d_model=256, num_heads=4)


def measure(row, case, warmup, steps):
    """Median seconds of one forward and backward step of `row`'s layer."""
    import keras
    import numpy as np
    import tensorflow as tf

    from comparison.measure import time_calls

    batch, length, d_model = SHAPE["batch"], SHAPE["length"], SHAPE["d_model"]
    heads = SHAPE["num_heads"]
    if row in ("keras_transformer", "baseline"):  # the baseline's on PYTHONPATH
        from keras_transformer.layers import MultiHeadAttention
    else:
        MultiHeadAttention = keras.layers.MultiHeadAttention
    layer = MultiHeadAttention(num_heads=heads, key_dim=d_model // heads)
    rng = np.random.default_rng(0)
    query = tf.constant(rng.normal(size=(batch, length, d_model)), tf.float32)
    memory = tf.constant(rng.normal(size=(batch, length + 4, d_model)), tf.float32)
    lengths = rng.integers(length // 2, length + 5, size=(batch, 1))
    memory_mask = tf.constant(np.arange(length + 4)[None, :] < lengths)
    layer(query, memory)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            tape.watch(query)
            if case == CASES[0]:
                output = layer(query, query, use_causal_mask=True, training=True)
            else:
                output = layer(query, memory, value_mask=memory_mask, training=True)
            loss = tf.reduce_sum(output)
        return tape.gradient(loss, [query, *layer.trainable_variables])

    return statistics.median(time_calls(step, warmup, steps))


def run_row(row, case, warmup, steps, baseline=None):
    """Seconds of one step, measured in a fresh process (the baseline's
    package first on its path)."""
    here = os.path.dirname(os.path.abspath(__file__))
    command = [sys.executable, os.path.abspath(__file__), "--row", row, "--case", case]
    command += ["--warmup", str(warmup), "--steps", str(steps)]
    env = dict(os.environ)
    if row == "baseline":
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [baseline, env.get("PYTHONPATH")]))
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=here, env=env)
    return float(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per row")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps per process")
    parser.add_argument("--steps", type=int, default=200, help="timed steps per process")
    parser.add_argument("--baseline", help="another checkout of this repository: a row of its own")
    parser.add_argument("--row", choices=ROWS, help=argparse.SUPPRESS)
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.row:  # one measurement, in this process
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        print(measure(args.row, args.case, args.warmup, args.steps))
        return
    shape = ", ".join(f"{k} {v}" for k, v in SHAPE.items())
    rows = ROWS if args.baseline else ROWS[:2]
    print(f"One attention layer, forward and backward, float32 ({shape}), TensorFlow")
    print(f"{args.rounds} rounds per row, each a fresh process of {args.steps} timed steps")
    if args.baseline:
        print(f"baseline: {os.path.abspath(args.baseline)}")
    print("\n| case | layer | ms/step | rounds (ms) | speed vs Keras's | paired |")
    print("| --- | --- | ---: | --- | ---: | ---: |")
    for case in CASES:
        times = {row: [] for row in rows}
        for _ in range(args.rounds):
            for row in rows:
                times[row].append(run_row(row, case, args.warmup, args.steps, args.baseline))
        keras_time = statistics.median(times["keras"])
        for row in rows:
            median = statistics.median(times[row])
            rounds = " ".join(f"{1000 * t:.2f}" for t in times[row])
            paired = statistics.median(
                k / t for k, t in zip(times["keras"], times[row], strict=True)
            )
            print(
                f"| {case} | {row} | {1000 * median:.2f} | {rounds} | "
                f"{keras_time / median:.2f}x | {paired:.2f}x |"
            )


if __name__ == "__main__":
    main()

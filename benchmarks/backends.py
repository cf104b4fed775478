"""One `fit` step of the same model on each Keras backend, each in a fresh
process: TensorFlow, JAX and PyTorch.

    python benchmarks/backends.py [--preset tiny] [--steps 10] [--backends tensorflow jax torch]

Every backend trains the same preset with `training.compile_for_training`
(the paper's loss, metrics and Adam schedule) on the same random batch,
through `train_on_batch`. Prints the median step over the timed steps (the
first steps, which compile, excluded), target tokens per second, and the
ratio against the first backend listed, measured in the same invocation.
Compilation is each backend's default here: TensorFlow's graph without XLA
on a CPU (`training.recommended_jit_compile`), JAX's `jit`, PyTorch eager.
"""

import argparse
import json
import statistics
import time

from script_workers import run_worker

WARMUP_STEPS = 3


def worker(preset, steps, batch, length, vocab):
    import keras
    import numpy as np

    from keras_transformer import Transformer
    from keras_transformer import training

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    source = rng.integers(4, vocab, size=(batch, length)).astype("int32")
    target = rng.integers(4, vocab, size=(batch, length + 1)).astype("int32")
    model = Transformer.from_preset(preset, vocab_size=vocab)
    training.compile_for_training(model)
    inputs, labels = (source, target[:, :-1]), target[:, 1:]
    times = []
    for step in range(WARMUP_STEPS + steps):
        start = time.perf_counter()
        logs = model.train_on_batch(inputs, labels, return_dict=True)
        float(logs["loss"])  # wait for the step (JAX dispatches asynchronously)
        if step >= WARMUP_STEPS:
            times.append(time.perf_counter() - start)
    return {
        "backend": keras.backend.backend(),
        "step_s": statistics.median(times),
        "tokens_per_s": batch * length / statistics.median(times),
        "loss": float(logs["loss"]),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--backends", nargs="+", default=["tensorflow", "jax", "torch"])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = worker(args.preset, args.steps, args.batch, args.length, args.vocab)
        print(json.dumps(result))
        return
    options = ["--preset", args.preset, "--steps", str(args.steps), "--batch", str(args.batch)]
    options += ["--length", str(args.length), "--vocab", str(args.vocab)]
    environment = {"TF_CPP_MIN_LOG_LEVEL": "3"}
    results = [
        run_worker(__file__, backend, options, {**environment, "KERAS_BACKEND": backend})
        for backend in args.backends
    ]
    first = results[0]["step_s"]
    print(
        f"preset {args.preset}, batch {args.batch} x {args.length} target tokens, "
        f"vocabulary {args.vocab}, median of {args.steps} steps"
    )
    print("| backend | step (ms) | target tokens/s | vs first |")
    print("| --- | ---: | ---: | ---: |")
    for result in results:
        print(
            f"| {result['backend']} | {1000 * result['step_s']:.0f} | "
            f"{result['tokens_per_s']:,.0f} | {first / result['step_s']:.2f}x |"
        )


if __name__ == "__main__":
    main()

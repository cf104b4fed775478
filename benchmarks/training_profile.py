"""Where the time of one CPU training step goes, by kind of op, and how
close the step comes to the machine's own matmul speed.

    python benchmarks/training_profile.py
    python benchmarks/training_profile.py --precisions none --batch_tokens 2048

Trains the README's `small` model (`examples/wmt_ende.py --data
multi30k`: vocabulary 4,000, dropout 0.2, pre-norm, the paper's loss,
optimizer and metrics through `compile_for_training`) on one fixed
random batch of about `--batch_tokens` target tokens (`--length` tokens
a side), so the input pipeline costs what a cached one does. Each
precision runs in a process of its own: it times `--steps` updates after
`--warmup` ones, then traces `--profile_steps` updates with TensorFlow's
profiler and sums each op's time into one of the kinds below, by the
op's type and the name scope it runs in:

* matmuls: every `MatMul`, `_FusedMatMul` (its bias and activation
  included), `BatchMatMul` and `Einsum`, forward and backward: the
  projections, the feed-forward, the attention products, the logits;
* attention: the attentions' other ops (softmax, masks, transposes);
* norms: the layer normalizations, forward and backward;
* dropout: drawing and applying the dropout masks;
* loss and metrics: the label-smoothed loss over the logits, its
  gradient, and the accuracy and perplexity metrics;
* optimizer: Adam's updates of each variable and the step counters;
* input: the `tf.data` iterator;
* other model ops: embeddings, positions, residual additions, the
  activations' gradients.

Op time is summed over the executor's threads (two may run ops side by
side, each op may use both cores), so the kinds are shares of that sum,
not of the wall time. The table also prints the step's matmul FLOPs
(`comparison.flops.train_flops`, from the model's shapes), its GFLOP/s
over the wall time, and that as a share of the ceiling measured first in
the same process: the best of `tf.matmul` at the feed-forward's shape,
`(batch_tokens, d_model) x (d_model, d_ff)`, in the row's precision.
Compare rows of one run on one machine.
"""

import argparse
import collections
import glob
import json
import os
import sys
import time

from script_workers import run_worker
from script_workers import scratch_directory

from comparison.flops import train_flops

KINDS = (
    "matmuls",
    "attention",
    "norms",
    "dropout",
    "loss and metrics",
    "optimizer",
    "input",
    "other model ops",
)
MATMUL_TYPES = ("MatMul", "_FusedMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum")
# The model's name scope: ops outside it are the loss's, the metrics', the
# optimizer's or the input's.
MODEL_SCOPE = "transformer"


def kind_of(name, op_type):
    """The kind (`KINDS`) of an op from its full name and its type.

    >>> kind_of("StatefulPartitionedCall/transformer_1/encoder_1/layer_0_1/"
    ...         "self_attention_norm_1/mul", "Mul")
    'norms'
    """
    scopes = name.lower().split("/")
    if op_type in MATMUL_TYPES or op_type.startswith("_MklMatMul"):
        return "matmuls"
    if op_type.startswith("IteratorGetNext"):
        return "input"
    if not any(scope.startswith(MODEL_SCOPE) for scope in scopes):
        if any(scope.startswith(("adam", "sgd", "optimizer")) for scope in scopes):
            return "optimizer"
        return "loss and metrics"
    if any("dropout" in scope for scope in scopes) or op_type.startswith("StatelessRandom"):
        return "dropout"
    if any("norm" in scope for scope in scopes):
        return "norms"
    if any("attention" in scope for scope in scopes):
        return "attention"
    return "other model ops"


def op_times(xplane_path):
    """{(kind, op type): [milliseconds, calls]} of every op event in a
    profiler trace (`*.xplane.pb`), summed over threads."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(xplane_path, "rb") as f:
        space.ParseFromString(f.read())
    times = collections.defaultdict(lambda: [0.0, 0])
    for plane in space.planes:
        names = {key: value.name for key, value in plane.event_metadata.items()}
        for line in plane.lines:
            if line.name == "python":  # the caller's events, which hold the ops'
                continue
            for event in line.events:
                full = names.get(event.metadata_id, "")
                # Ops are "scope/name:type"; the executor's own events are not.
                if "/" not in full.split(":")[0] or "::" in full or " " in full:
                    continue
                name, op_type = full.rsplit(":", 1)
                entry = times[(kind_of(name, op_type), op_type)]
                entry[0] += event.duration_ps / 1e9
                entry[1] += 1
    return dict(times)


def matmul_ceiling(tf, rows, inner, columns, dtype, seconds=2.0):
    """The best GFLOP/s of `tf.matmul` of `(rows, inner) x (inner,
    columns)` in `dtype` over `seconds`, in rounds of 20 products."""
    a = tf.cast(tf.random.normal((rows, inner)), dtype)
    b = tf.cast(tf.random.normal((inner, columns)), dtype)
    product = tf.function(lambda a, b: tf.matmul(a, b))
    product(a, b).numpy()
    best, end = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        for _ in range(20):
            result = product(a, b)
        result.numpy()
        best = max(best, 20 * 2 * rows * inner * columns / (time.perf_counter() - start) / 1e9)
    return best


def worker(args):
    """One precision's measurements, as a JSON-ready dict."""
    import numpy as np
    import tensorflow as tf

    import keras_transformer as kt
    from keras_transformer import training

    settings = training.TrainingSettings(warmup_steps=800, precision=args.worker)
    model = kt.Transformer.from_preset(
        "small",
        vocab_size=args.vocab_size,
        dropout=0.2,
        norm_first=True,
        max_length=128,
        dtype=settings.dtype_policy(),
    )
    compute_dtype = model.dtype_policy.compute_dtype
    ceiling = matmul_ceiling(tf, args.batch_tokens, model.d_model, model.d_ff, compute_dtype)
    net = training.compile_for_training(model, settings)
    batch = max(1, args.batch_tokens // args.length)
    ids = np.random.default_rng(0).integers(4, args.vocab_size, (batch, args.length + 1))
    ids = ids.astype("int32")
    pair = ((ids[:, 1:], ids[:, :-1]), ids[:, 1:])
    data = tf.data.Dataset.from_tensors(pair).repeat()
    net.fit(data, steps_per_epoch=args.warmup, epochs=1, verbose=0)
    start = time.perf_counter()
    net.fit(data, steps_per_epoch=args.steps, epochs=1, verbose=0)
    step = (time.perf_counter() - start) / args.steps
    trace = scratch_directory("training_profile_")
    tf.profiler.experimental.start(trace)
    net.fit(data, steps_per_epoch=args.profile_steps, epochs=1, verbose=0)
    tf.profiler.experimental.stop()
    (path,) = glob.glob(os.path.join(trace, "plugins", "profile", "*", "*.xplane.pb"))
    by_kind = collections.Counter()
    by_type = collections.Counter()
    for (kind, op_type), (ms, _) in op_times(path).items():
        by_kind[kind] += ms / args.profile_steps
        by_type[f"{kind}: {op_type}"] += ms / args.profile_steps
    cfg = dict(d_model=model.d_model, d_ff=model.d_ff, layers=model.num_layers)
    cfg["vocab"] = model.target_vocab_size
    flops = train_flops(cfg, batch, args.length, args.length)
    return {
        "precision": args.worker,
        "compute_dtype": compute_dtype,
        "weights": model.count_params(),
        "batch": [batch, args.length],
        "step_ms": 1000 * step,
        "tokens_per_second": batch * args.length / step,
        "matmul_gflop": flops / 1e9,
        "gflops": flops / step / 1e9,
        "ceiling_gflops": ceiling,
        "kinds_ms": dict(by_kind),
        "top_ops_ms": dict(by_type.most_common(args.top)),
    }


def table(rows):
    """The rows' kinds as a Markdown table, then their speed."""
    lines = [
        "| kind | " + " | ".join(f"{r['precision']} ms (share)" for r in rows) + " |",
        "| --- |" + " ---: |" * len(rows),
    ]
    totals = [sum(r["kinds_ms"].values()) for r in rows]
    for kind in KINDS:
        cells = [
            f"{r['kinds_ms'].get(kind, 0.0):,.1f} ({100 * r['kinds_ms'].get(kind, 0.0) / t:.0f}%)"
            for r, t in zip(rows, totals, strict=True)
        ]
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    lines.append("| all ops (thread time) | " + " | ".join(f"{t:,.1f}" for t in totals) + " |")
    lines += [
        "",
        "| precision | step ms | target tokens/s | matmul GFLOP a step | GFLOP/s "
        "| matmul ceiling GFLOP/s | share of the ceiling |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['precision']} ({r['compute_dtype']}) | {r['step_ms']:,.1f} "
            f"| {r['tokens_per_second']:,.0f} | {r['matmul_gflop']:.1f} | {r['gflops']:.1f} "
            f"| {r['ceiling_gflops']:.1f} | {100 * r['gflops'] / r['ceiling_gflops']:.0f}% |"
        )
    return "\n".join(lines)


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--precisions", default="none,bf16", help="comma-separated `TrainingSettings.precision`s"
    )
    parser.add_argument("--batch_tokens", type=int, default=1024, help="the README run's")
    parser.add_argument("--length", type=int, default=16, help="tokens of each source and target")
    parser.add_argument("--vocab_size", type=int, default=4000)
    parser.add_argument("--warmup", type=int, default=10, help="updates before timing")
    parser.add_argument("--steps", type=int, default=20, help="timed updates")
    parser.add_argument("--profile_steps", type=int, default=5, help="traced updates")
    parser.add_argument("--top", type=int, default=12, help="also list the costliest op types")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    if args.worker:
        print(json.dumps(worker(args)))
        return
    forwarded = list(argv if argv is not None else sys.argv[1:])
    rows = []
    for precision in args.precisions.split(","):
        rows.append(run_worker(__file__, precision, forwarded, {"TF_CPP_MIN_LOG_LEVEL": "3"}))
        print(f"{precision}: {rows[-1]['step_ms']:,.1f} ms a step", file=sys.stderr, flush=True)
    print(table(rows))
    for r in rows:
        print(f"\n{r['precision']}, costliest op types (ms a step, thread time):")
        for name, ms in r["top_ops_ms"].items():
            print(f"  {ms:8.1f}  {name}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

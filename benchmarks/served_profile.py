"""Where the time of one served decoding call goes, op by op, as TF
Serving runs it.

    python benchmarks/served_profile.py --config tiny --task beam4
    python benchmarks/served_profile.py --config tiny --task beam4_single --top 25

Saves `compare.py`'s decoding search for ours without XLA (the `served`
row: the configuration's random model, 64 sentences of 32 tokens decoded
to exactly 40 tokens, or one sentence of 20 with `--task beam4_single`),
loads it with the TF1 session loader and TF Serving's default session
settings, times `--calls` calls, then runs one more with a full trace
(`RunOptions.FULL_TRACE`: the executor's own record of every op it ran,
what TF Serving's executor does, nothing recompiled). Each op execution
is put into a kind by its op type:

* matmul: the dense projections, the output projection and the attention
  products (`MatMul`, `BatchMatMulV2`/`V3` and their oneDNN fusions);
* cache write: `TensorStridedSliceUpdate`, the in-place write of each
  step's keys and values into the self-attention cache;
* select: `Select`/`SelectV2`, the search's and the masks' `tf.where`s;
* gather (reorder): `GatherV2` and friends, the beam search's reordering
  of the cache rows and the embedding lookups;
* loop control: the while loop's `Enter`, `Merge`, `Switch`,
  `NextIteration`, `Exit`, `LoopCond` and `Identity` nodes (their
  `Identity` copies included);
* top-k, softmax: the search's candidates and normalizer;
* elementwise: adds, multiplies, comparisons, casts (layer norms, masks,
  residuals);
* shape: reshapes, transposes, concats, slices, `Shape`, `Fill`, `Range`;
* other: the rest.

The table gives each kind's executions per call and per decoding step,
its op time summed over the executor's threads (two ops may run side by
side, so the sum can exceed the call's wall time) and its share of that
sum. `--top N` also lists the N costliest op types.
"""

import argparse
import collections
import os
import re
import statistics
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from comparison.measure import time_calls  # noqa: E402
from comparison.served import SessionSignature  # noqa: E402
from comparison.served import save_compare_search  # noqa: E402
from comparison.workload import CONFIGS  # noqa: E402
from comparison.workload import DECODE_SHAPES  # noqa: E402
from comparison.workload import special_ids  # noqa: E402

# Op types by kind, compared without a version suffix (`SelectV2`: `Select`).
KINDS = {
    "matmul": ("MatMul", "BatchMatMul", "Einsum"),
    "cache write": ("TensorStridedSliceUpdate",),
    "select": ("Select",),
    "gather (reorder)": ("Gather", "GatherNd", "ResourceGather"),
    "loop control": (
        "Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond", "Identity", "IdentityN",
    ),
    "top-k, softmax": ("TopK", "Softmax", "LogSoftmax"),
    "elementwise": (
        "Add", "AddN", "Sub", "Mul", "RealDiv", "Div", "DivNoNan", "Maximum", "Minimum", "Equal",
        "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr",
        "LogicalNot", "Cast", "Rsqrt", "Sqrt", "Exp", "Log", "Neg", "Square", "Pow", "Relu",
        "Tanh", "Sigmoid", "Floor", "Mean", "Sum", "Max", "Min", "ArgMax", "Any", "All",
        "OneHot", "Prod", "SquaredDifference", "FloorMod", "FloorDiv", "BiasAdd",
    ),
    "shape": (
        "Reshape", "Transpose", "Concat", "Slice", "StridedSlice", "Shape", "Fill", "Range",
        "Pack", "Unpack", "ExpandDims", "Squeeze", "Tile", "BroadcastTo", "ZerosLike",
        "OnesLike", "Size", "Pad", "Const", "Split", "Rank",
    ),
}  # fmt: skip


def op_type(node):
    """The op type of a traced node: from its timeline label `name =
    Op(inputs)`, without oneDNN's `_Mkl`/`_Fused` prefixes (`_MklFusedMatMul`,
    a matrix product with its bias added, is a `MatMul`)."""
    label = node.timeline_label
    kind = label.split(" = ", 1)[1].split("(", 1)[0] if " = " in label else node.node_name
    for prefix in ("_MklNative", "_Mkl", "_Fused", "Fused"):
        kind = kind.removeprefix(prefix)
    return kind.split(":")[0] or node.node_name


def kind_of(op):
    """The kind (a `KINDS` key, or "other") of an op type."""
    base = re.sub(r"V\d+$", "", op)
    return next((kind for kind, ops in KINDS.items() if base in ops), "other")


def traced_ops(signature, inputs):
    """`{op type: [count, microseconds]}` of one call of a
    `SessionSignature`, from the executor's full trace."""
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    metadata = tf.compat.v1.RunMetadata()
    feed = {signature.inputs[key]: value for key, value in inputs.items()}
    signature.session.run(signature.outputs, feed, options=options, run_metadata=metadata)
    ops = collections.defaultdict(lambda: [0, 0])
    for device in metadata.step_stats.dev_stats:
        for node in device.node_stats:
            if node.node_name in ("_SOURCE", "_SINK"):
                continue
            entry = ops[op_type(node)]
            entry[0] += 1
            entry[1] += node.op_end_rel_micros
    return ops


def table(groups, steps, title, total):
    """Markdown rows of `{name: [count, microseconds]}` by time, with the
    executions per decoding step and the share of `total` microseconds."""
    lines = [
        f"| {title} | executions per call | per step | op time, ms | share |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, (count, us) in sorted(groups.items(), key=lambda item: -item[1][1]):
        lines.append(
            f"| {name} | {count:,} | {count / steps:,.1f} | {us / 1000:,.1f} | "
            f"{100 * us / total:.1f}% |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    parser.add_argument("--task", choices=sorted(DECODE_SHAPES), default="beam4")
    parser.add_argument("--calls", type=int, default=3, help="timed calls before the trace")
    parser.add_argument("--top", type=int, default=0, help="also list the N costliest op types")
    args = parser.parse_args(argv)
    cfg, ids, shape = CONFIGS[args.config], special_ids(), DECODE_SHAPES[args.task]
    with tempfile.TemporaryDirectory() as path:
        source = save_compare_search(cfg, ids, shape, path)
        signature = SessionSignature(path)
        times = time_calls(lambda: signature(source=source), 1, args.calls)
        ops = traced_ops(signature, {"source": source})
    kinds = collections.defaultdict(lambda: [0, 0])
    for op, (count, us) in ops.items():
        kinds[kind_of(op)][0] += count
        kinds[kind_of(op)][1] += us
    steps, total = shape["steps"], sum(us for _, us in ops.values()) or 1
    print(
        f"config {args.config}, task {args.task} ({shape['batch']} x {shape['source_len']} "
        f"tokens, {steps} steps, beam {shape['beam']}), served through the session loader: "
        f"median {1000 * statistics.median(times):,.1f} ms per call over {args.calls} calls, "
        f"{os.cpu_count()} cores; {sum(c for c, _ in ops.values()):,} op executions, "
        f"{total / 1000:,.1f} ms of op time"
    )
    print()
    print(table(kinds, steps, "kind", total))
    if args.top:
        print()
        top = dict(sorted(ops.items(), key=lambda item: -item[1][1])[: args.top])
        print(table(top, steps, "op type", total))
    return dict(kinds), np.median(times)


if __name__ == "__main__":
    main()

"""Where the time of one decoding call goes, under XLA, by kind of work.

    python benchmarks/decoding_profile.py --config small --task beam4

Runs `compare.py`'s decoding workload for ours (the configuration's random
model, 64 sentences of 32 tokens decoded to exactly 40 tokens, or one
sentence with `--task beam4_single`) as `compare.py` compiles it, times a
few calls, then traces one call with TensorFlow's profiler. Each XLA:CPU
thunk the trace records is looked up in the optimized HLO (dumped on the
way) and put into one of the kinds below by its shape; the table prints
the thunks' time summed over all threads (two threads may run thunks side
by side, so the sum can exceed the call's wall time) and each kind's share
of that sum:

* encoder: everything outside the decoding loops (the encoder, the
  cross-attention keys and values, the cache set-up);
* output projection: the `(rows, vocab)` logits matmul;
* projections, feed-forward: the decoder layers' other matmuls;
* attention products: the batched products of queries with the cached
  keys and values and with the encoder memory;
* cache, reorder and write: the fused passes that write each step's key
  and value into the self-attention cache (and, in a beam search, reorder
  its rows for the chosen hypotheses);
* cache, loop copies: copies of the cache back into a loop's buffers;
* logits passes: any other op that reads or writes `rows × vocab` values
  (the normalizer, the top-k candidates, the benchmark's EOS mask);
* other: layer norms, residual adds, softmax, the search's bookkeeping.

The kinds come from shapes, not from names, so they are a guide: compare
two tasks or two versions of the code in one run, on one machine.
`--top N` also lists the N costliest thunks.
"""

import argparse
import collections
import dataclasses
import glob
import math
import os
import re
import statistics
import sys

from script_workers import scratch_directory

KINDS = (
    "encoder",
    "output projection",
    "projections, feed-forward",
    "attention products",
    "cache, reorder and write",
    "cache, loop copies",
    "logits passes",
    "other",
)
# Thunks that only run others (their time is counted in those).
_CONTROL = {"while", "conditional", "call"}


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One instruction of an optimized HLO module."""

    opcode: str
    dims: tuple  # of the output; () for a scalar or a tuple
    operands: tuple  # names of the operands
    batched: bool  # a dot with batch dimensions
    in_entry: bool  # in the ENTRY computation (outside every loop)


_LINE = re.compile(r"\s*(?:ROOT )?%([\w.\-]+) = (\(.*?\)|\S+) ([\w\-]+)\((.*)")
_SHAPE = re.compile(r"^[a-z]+\d*\[([\d,]*)\]")


def parse_hlo(text):
    """`{name: Instruction}` for every instruction of an HLO module's text
    (as XLA dumps it after optimizations)."""
    instructions, in_entry = {}, False
    for line in text.splitlines():
        if line.startswith("ENTRY "):
            in_entry = True
        elif line.startswith("%"):  # the header of another computation
            in_entry = False
        match = _LINE.match(line)
        if not match:
            continue
        name, shape, opcode, rest = match.groups()
        dims = _SHAPE.match(shape)
        dims = tuple(int(d) for d in dims.group(1).split(",") if d) if dims else ()
        arguments = rest.split(")", 1)[0]
        operands = tuple(re.findall(r"%([\w.\-]+)", arguments))
        batched = opcode == "dot" and "lhs_batch_dims" in rest
        instructions[name] = Instruction(opcode, dims, operands, batched, in_entry)
    return instructions


def classify(instruction, instructions, rows, heads, depth, vocab):
    """The kind (one of `KINDS`) of an instruction, from its shapes, or
    None for control flow. `rows` is the decoder's rows per step (batch ×
    beams), `heads` and `depth` the attention heads and their size."""
    if instruction.opcode in _CONTROL:
        return None
    if instruction.in_entry:
        return "encoder"
    dims = instruction.dims
    if instruction.opcode == "dot":
        if instruction.batched:
            return "attention products"
        return "output projection" if dims and dims[-1] == vocab else "projections, feed-forward"
    if len(dims) == 4 and dims[0] == rows and dims[1] == heads and dims[3] == depth:
        return "cache, loop copies" if instruction.opcode == "copy" else "cache, reorder and write"
    operands = [instructions[name].dims for name in instruction.operands if name in instructions]
    if max(math.prod(d) for d in [dims, *operands]) >= rows * vocab:
        return "logits passes"
    return "other"


def thunk_times(trace_dir):
    """`{event name: total ms}` over every thread of the profiler trace."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    totals = collections.Counter()
    for path in glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True):
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
        for plane in space.planes:
            names = {key: meta.name for key, meta in plane.event_metadata.items()}
            for line in plane.lines:
                for event in line.events:
                    totals[names.get(event.metadata_id, "")] += event.duration_ps / 1e9
    return totals


def _classified(times, instructions, **sizes):
    """`(ms, kind, name)` for each thunk that is an HLO instruction and not
    control flow; `sizes` as `classify` takes them."""
    for name, ms in times.items():
        if name in instructions:
            kind = classify(instructions[name], instructions, **sizes)
            if kind is not None:
                yield ms, kind, name


def by_kind(times, instructions, **sizes):
    """`{kind: ms}` of the thunks whose names are HLO instructions."""
    kinds = collections.Counter({kind: 0.0 for kind in KINDS})
    for ms, kind, _ in _classified(times, instructions, **sizes):
        kinds[kind] += ms
    return kinds


def costliest(times, instructions, count, **sizes):
    """The `count` instructions with the most thunk time: `(ms, kind, name,
    opcode, output dims)`, most first."""
    rows = [
        (ms, kind, name, instructions[name].opcode, instructions[name].dims)
        for ms, kind, name in _classified(times, instructions, **sizes)
    ]
    return sorted(rows, reverse=True)[:count]


def table(kinds):
    total = sum(kinds.values())
    lines = ["| kind | ms (all threads) | share |", "| --- | --- | --- |"]
    for kind in KINDS:
        lines.append(f"| {kind} | {kinds[kind]:,.1f} | {100 * kinds[kind] / total:.1f}% |")
    lines.append(f"| all thunks | {total:,.1f} | 100% |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", choices=["tiny", "small", "base"], default="tiny")
    parser.add_argument("--task", choices=["greedy", "beam4", "beam4_single"], default="beam4")
    parser.add_argument("--calls", type=int, default=3, help="timed calls before the trace")
    parser.add_argument("--top", type=int, default=0, help="also list the costliest thunks")
    args = parser.parse_args(argv)

    work = scratch_directory("decoding_profile_")
    dump = os.path.join(work, "hlo")
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={dump} --xla_dump_hlo_as_text"
    )
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tensorflow as tf

    from comparison import ours
    from comparison import workload
    from comparison.measure import time_calls

    cfg, ids, shape = (
        workload.CONFIGS[args.config],
        workload.special_ids(),
        workload.DECODE_SHAPES[args.task],
    )
    model = ours.build_model(cfg, "fp32", dropout=0.0)
    run = ours.searcher(model, shape["beam"], shape["steps"], ids, jit=True)
    source = tf.constant(workload.decode_sources(cfg, ids, (shape["batch"], shape["source_len"])))
    call = lambda: run(source).numpy()  # noqa: E731
    walls = time_calls(call, warmup=2, steps=args.calls)  # the warm-up compiles
    tf.profiler.experimental.start(os.path.join(work, "trace"))
    (traced,) = time_calls(call, warmup=0, steps=1)
    tf.profiler.experimental.stop()

    modules = glob.glob(os.path.join(dump, "*after_optimizations.txt"))
    with open(max(modules, key=os.path.getsize)) as f:  # the decoding function
        instructions = parse_hlo(f.read())
    sizes = dict(
        rows=shape["batch"] * shape["beam"],
        heads=cfg["heads"],
        depth=cfg["d_model"] // cfg["heads"],
        vocab=cfg["vocab"],
    )
    times = thunk_times(os.path.join(work, "trace"))
    kinds = by_kind(times, instructions, **sizes)
    print(
        f"config {args.config}, {args.task}: {shape['batch']} sentence(s), beam {shape['beam']}, "
        f"{shape['steps']} steps; call wall ms, median of {args.calls}: "
        f"{1000 * statistics.median(walls):,.1f}; the traced call: {1000 * traced:,.1f}\n"
    )
    print(table(kinds))
    if args.top:
        print("\n| ms | kind | thunk | op | output |\n| --- | --- | --- | --- | --- |")
        for ms, kind, name, opcode, dims in costliest(times, instructions, args.top, **sizes):
            print(f"| {ms:,.1f} | {kind} | {name} | {opcode} | {list(dims)} |")


if __name__ == "__main__":
    main()

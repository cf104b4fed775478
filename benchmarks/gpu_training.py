"""Training speed on one GPU: ours on JAX and on PyTorch against
`torch.nn.Transformer`, eager and compiled, on the paper's batch.

    python benchmarks/gpu_training.py                    # base, 256 x 100 + 100 tokens, bf16
    python benchmarks/gpu_training.py --preset big
    python benchmarks/gpu_training.py --preset tiny      # a CPU smoke run (seconds)

Needs JAX and PyTorch (and Keras), not TensorFlow: it runs where the
package imports without it. Each row is one optimizer step of the same
model (the preset, the paper's 37,000-token shared vocabulary, dropout
0.1, Adam, label smoothing 0.1) on the same batch (`--batch` sentences of
`--source_len` source and `--target_len` target tokens, no padding), in a
process of its own (`gpu_rows.py`):

| row | what |
| --- | --- |
| `ours_jax` | `Transformer`, Keras on JAX (the step compiled by XLA) |
| `ours_jax_unfused` | the same, attending by the layers' own ops, not the fused kernel |
| `ours_torch` | `Transformer`, Keras on PyTorch, eager (Keras's default there) |
| `ours_torch_compiled` | the same with `jit_compile=True` (Keras: `torch.compile` of the step) |
| `torch` | `torch.nn.Transformer` made the same model as ours, eager (fused SDPA) |
| `torch_compiled` | the same under `torch.compile`, the loss inside, `fullgraph=True` |
| `sdpa` | layers written over `scaled_dot_product_attention` (as eole's), eager |
| `sdpa_compiled` | the same under `torch.compile`, the loss inside, `fullgraph=True` |

The PyTorch peers run as a PyTorch user at their best runs them
(`comparison.peer_torch.PeerOptions`: the causal mask registered once and
flagged causal, padding masks only for padded batches, fused Adam, the
loss in the compiled graph, no dropouts or norms ours does not have).
`--ablation` adds rows of compiled `torch.nn.Transformer` from the options
this benchmark once used to the best, one change per row, and a table of
each change's share.

Columns: the median step after `--warmup` steps, each waited for; the
step among `--steps` run in a row, waited for once at the end (ours by
`fit`, as Keras trains; the peer by a plain loop), from which come the
target tokens per second and the MFU (the FLOPs of
`comparison.flops.train_flops` over the step time, against the bf16 dense
peak of the GPU it names, or `--peak_tflops`); and the first step
(tracing and compiling). A row that does not finish within
`--row_timeout` seconds is reported so, and one that fails with the last
line of its error (its traceback goes to stderr). Every compiled PyTorch
row reports Dynamo's graphs, graph breaks and recompiles; one with a
graph break fails (but an ablation row, whose breaks are the point);
`--compiler aot_eager` (CI's CPU smoke run) captures the same graphs and
generates no code, so its first step is not Inductor's compile time. Below
the table, ours on JAX and ours compiled on PyTorch against the best
compiled PyTorch row without a graph break.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import typing

from comparison.flops import train_flops
from comparison.peer_torch import ABLATION
from comparison.peer_torch import BEST
from comparison.peer_torch import PeerOptions


class Row(typing.NamedTuple):
    kind: str  # a worker of gpu_rows.py
    backend: str  # its KERAS_BACKEND
    compiled: bool
    label: str
    fused: bool = True  # ours: attention through the backend's fused kernel
    peer: str = "nn"  # a PyTorch peer: torch.nn.Transformer ("nn") or SDPA layers ("sdpa")
    options: PeerOptions = BEST  # a PyTorch peer's
    ablation: bool = False  # a row of the ablation: graph breaks reported, not failed


ROWS = {
    "ours_jax": Row("ours", "jax", True, "`Transformer`, Keras on JAX (XLA)"),
    "ours_jax_unfused": Row(
        "ours", "jax", True, "`Transformer`, Keras on JAX (XLA), attention unfused", fused=False
    ),
    "ours_torch": Row("ours", "torch", False, "`Transformer`, Keras on PyTorch (eager)"),
    "ours_torch_compiled": Row(
        "ours",
        "torch",
        True,
        "`Transformer`, Keras on PyTorch, `jit_compile=True` (`torch.compile`)",
    ),
    "torch": Row("torch", "torch", False, "`torch.nn.Transformer`, eager (fused SDPA)"),
    "torch_compiled": Row(
        "torch", "torch", True, "`torch.nn.Transformer`, `torch.compile(fullgraph=True)`"
    ),
    "sdpa": Row("torch", "torch", False, "PyTorch layers over SDPA, eager", peer="sdpa"),
    "sdpa_compiled": Row(
        "torch", "torch", True, "PyTorch layers over SDPA, `torch.compile(fullgraph=True)`",
        peer="sdpa",
    ),
}  # fmt: skip
# The best compiled PyTorch rows, which ours is measured against.
PEER_ROWS = ("torch_compiled", "sdpa_compiled")
# What each row of the ablation adds to the one above (`PeerOptions`' fields).
ABLATION_CHANGES = (
    "as this benchmark ran it before",
    "+ causal mask registered, `tgt_is_causal=True`",
    "+ padding masks only for padded batches",
    "+ `Adam(fused=True)`",
    "+ loss in the compiled graph, `fullgraph=True`",
    "+ no extra dropouts or final norms (the same model as ours)",
)
ABLATION_ROWS = {
    f"ablation_{index}": Row(
        "torch", "torch", True, f"`nn.Transformer` compiled, {change}",
        options=options, ablation=True,
    )
    for index, (change, options) in enumerate(zip(ABLATION_CHANGES, ABLATION, strict=True))
}  # fmt: skip
# Dense bf16 peak TFLOP/s by a substring of the device's name, the first
# that matches (NVIDIA's data sheets, without sparsity).
PEAK_BF16_TFLOPS = (
    ("H100 PCIe", 756.0),
    ("H100", 989.4),
    ("H200", 989.4),
    ("A100", 312.0),
    ("L40S", 362.1),
    ("L4", 121.0),
)
# What `--preset` changes: the paper's runs, and a CPU smoke run.
SHAPES = {
    "base": dict(vocab=37000, batch=256, source_len=100, target_len=100, precision="bf16"),
    "big": dict(vocab=37000, batch=256, source_len=100, target_len=100, precision="bf16"),
    "tiny": dict(vocab=1000, batch=8, source_len=16, target_len=16, precision="fp32"),
}


def model_config(preset, vocab):
    """The preset's dimensions as `comparison.flops` reads them."""
    os.environ.setdefault("KERAS_BACKEND", "jax")  # reading the presets needs no TensorFlow
    from keras_transformer.models import PRESETS

    p = PRESETS[preset]
    return dict(
        vocab=vocab, d_model=p["d_model"], layers=p["num_layers"], heads=p["num_heads"],
        d_ff=p["d_ff"],
    )  # fmt: skip


def peak_tflops(device, given):
    if given:
        return given
    return next((peak for name, peak in PEAK_BF16_TFLOPS if name in device), None)


def run_row(name, spec, timeout):
    """One row in its own process; `None` if it did not finish in time."""
    row = {**ROWS, **ABLATION_ROWS}[name]
    spec = {**spec, "kind": row.kind, "compiled": row.compiled, "fused": row.fused}
    spec.update(peer=row.peer, options=list(row.options))
    try:
        output = subprocess.run(
            [sys.executable, __file__, "--worker", json.dumps(spec)],
            env={**os.environ, "KERAS_BACKEND": row.backend},
            check=True,
            capture_output=True,
            text=True,
            timeout=timeout,
        ).stdout
    except subprocess.TimeoutExpired:
        return None
    except subprocess.CalledProcessError as error:  # the other rows still run
        lines = error.stderr.strip().splitlines() or ["(no output)"]
        print(f"{name} failed:\n" + "\n".join(lines[-30:]), file=sys.stderr, flush=True)
        return {"error": lines[-1]}
    return json.loads(output.strip().splitlines()[-1])


def dynamo(result):
    """`graphs/breaks/recompiles` of a compiled PyTorch row, or `""`."""
    if "graph_breaks" not in result:
        return ""
    return f"{result['graphs']}/{result['graph_breaks']}/{result['recompiles']}"


def report(results, spec, args):
    """Prints the rows' table, ours against the best PyTorch row and the
    ablation's; returns `{row: target tokens/s in a row}` of the rows that
    ran (a compiled row with a graph break is failed, not counted)."""
    rows = {**ROWS, **ABLATION_ROWS}
    tokens = spec["batch"] * spec["target_len"]
    flops = train_flops(spec["cfg"], spec["batch"], spec["source_len"], spec["target_len"])
    print(
        f"\n{args.preset}: {spec['cfg']}, {spec['batch']} x {spec['source_len']} source + "
        f"{spec['target_len']} target tokens, {spec['precision']}, "
        f"{flops / 1e9:,.1f} GFLOPs a step; median of {args.steps} steps after {args.warmup}; "
        f"the PyTorch peers compiled by {spec['compiler']}\n"
    )
    print(
        "| row | device | attention | weights | step ms (each waited for) | step ms (in a row) "
        "| target tokens/s | MFU | first step (compile) s | graphs/breaks/recompiles | loss |\n"
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    rates, waited = {}, {}
    for name, result in results.items():
        label = rows[name].label
        if result is None:
            limit = args.row_timeout
            print(f"| {label} | | | | no step within {limit:.0f} s | | | | > {limit:.0f} | | |")
            continue
        if "error" in result:
            print(f"| {label} | | | | failed: {result['error'][:80]} | | | | | | |")
            continue
        step = statistics.median(result["times"])
        peak = peak_tflops(result["device"], args.peak_tflops)
        mfu = f"{100 * flops / result['in_a_row'] / (peak * 1e12):.1f}%" if peak else "—"
        broken = result.get("graph_breaks", 0) and not rows[name].ablation
        if not broken:
            waited[name] = tokens / step
            rates[name] = tokens / result["in_a_row"]
        speed = (
            f"failed: {result['graph_breaks']} graph breaks" if broken else f"{rates[name]:,.0f}"
        )
        print(
            f"| {label} | {result['device']} | {result['attention']} | {result['parameters']:,} "
            f"| {1000 * step:.1f} | {1000 * result['in_a_row']:.1f} | {speed} "
            f"| {mfu} | {result['first_step']:.1f} | {dynamo(result)} | {result['loss']:.3f} |"
        )
    peers = [name for name in PEER_ROWS if name in rates]
    if peers:
        best = max(peers, key=rates.get)
        for ours, target in (("ours_jax", 1.2), ("ours_torch_compiled", 0.8)):
            if ours in rates:
                ratio = rates[ours] / rates[best]
                each = waited[ours] / waited[best]
                verdict = "met" if ratio >= target else "missed"
                print(
                    f"\n{ours} / {best} (the best compiled PyTorch row): {ratio:.2f}x in a row, "
                    f"{each:.2f}x each waited for (target {target}x: {verdict})"
                )
    ablation = [name for name in ABLATION_ROWS if name in rates]
    if ablation:
        print("\n| change (cumulative) | step ms in a row | speed vs the row above |")
        print("| --- | ---: | ---: |")
        above = None
        for name in ablation:
            seconds = results[name]["in_a_row"]
            versus = "" if above is None else f"{above / seconds:.2f}x"
            print(f"| {rows[name].label} | {1000 * seconds:.1f} | {versus} |")
            above = seconds
    return rates


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="base", choices=tuple(SHAPES))
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=tuple(ROWS))
    parser.add_argument(
        "--ablation", action="store_true", help="add the PyTorch ablation's rows (see above)"
    )
    for name in ("vocab", "batch", "source_len", "target_len"):
        parser.add_argument(f"--{name}", type=int, help="default: the preset's")
    parser.add_argument("--precision", choices=("bf16", "fp32"), help="default: the preset's")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--row_timeout", type=float, default=600.0, help="seconds per row")
    parser.add_argument("--peak_tflops", type=float, help="the device's peak, for the MFU")
    parser.add_argument(
        "--compiler",
        default="inductor",
        choices=("inductor", "aot_eager"),
        help="`torch.compile`'s backend for the PyTorch peers; aot_eager captures the same "
        "graphs (Dynamo's counts are the same) and generates no code: for a smoke run",
    )
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        from gpu_rows import ROWS as WORKERS

        spec = json.loads(args.worker)
        print(json.dumps(WORKERS[spec["kind"]](spec)))
        return
    shape = {k: getattr(args, k) or v for k, v in SHAPES[args.preset].items()}
    spec = dict(
        preset=args.preset,
        cfg=model_config(args.preset, shape.pop("vocab")),
        warmup=args.warmup,
        steps=args.steps,
        compiler=args.compiler,
        **shape,
    )
    results = {}
    for name in args.rows + (list(ABLATION_ROWS) if args.ablation else []):
        results[name] = run_row(name, spec, args.row_timeout)
        print(f"{name}: {results[name]}", flush=True)
    report(results, spec, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"spec": spec, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()

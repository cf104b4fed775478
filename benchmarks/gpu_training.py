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
| `torch` | `torch.nn.Transformer` of the same shape, eager (fused SDPA) |
| `torch_compiled` | the same under `torch.compile` |

Columns: the median step after `--warmup` steps, each waited for; the
step among `--steps` run in a row, waited for once at the end (ours by
`fit`, as Keras trains; the peer by a plain loop), from which come the
target tokens per second and the MFU (the FLOPs of
`comparison.flops.train_flops` over the step time, against the bf16 dense
peak of the GPU it names, or `--peak_tflops`); and the first step
(tracing and compiling). A row that does not finish within
`--row_timeout` seconds is reported so, and one that fails with the last
line of its error (its traceback goes to stderr). Below the table, ours on JAX and
ours compiled on PyTorch against compiled `torch.nn.Transformer`.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import typing

from comparison.flops import train_flops


class Row(typing.NamedTuple):
    kind: str  # a worker of gpu_rows.py
    backend: str  # its KERAS_BACKEND
    compiled: bool
    label: str
    fused: bool = True  # ours: attention through the backend's fused kernel


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
    "torch_compiled": Row("torch", "torch", True, "`torch.nn.Transformer`, `torch.compile`"),
}
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
    row = ROWS[name]
    spec = {**spec, "kind": row.kind, "compiled": row.compiled, "fused": row.fused}
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


def report(results, spec, args):
    tokens = spec["batch"] * spec["target_len"]
    flops = train_flops(spec["cfg"], spec["batch"], spec["source_len"], spec["target_len"])
    print(
        f"\n{args.preset}: {spec['cfg']}, {spec['batch']} x {spec['source_len']} source + "
        f"{spec['target_len']} target tokens, {spec['precision']}, "
        f"{flops / 1e9:,.1f} GFLOPs a step; median of {args.steps} steps after {args.warmup}\n"
    )
    print(
        "| row | device | attention | step ms (each waited for) | step ms (in a row) "
        "| target tokens/s | MFU | first step (compile) s | loss |\n"
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    rates, waited = {}, {}
    for name, result in results.items():
        label = ROWS[name].label
        if result is None:
            limit = args.row_timeout
            print(f"| {label} | | | no step within {limit:.0f} s | | | | > {limit:.0f} | |")
            continue
        if "error" in result:
            print(f"| {label} | | | failed: {result['error'][:80]} | | | | | |")
            continue
        step = statistics.median(result["times"])
        waited[name] = tokens / step
        rates[name] = tokens / result["in_a_row"]
        peak = peak_tflops(result["device"], args.peak_tflops)
        mfu = f"{100 * flops / result['in_a_row'] / (peak * 1e12):.1f}%" if peak else "—"
        print(
            f"| {label} | {result['device']} | {result['attention']} "
            f"| {1000 * step:.1f} | {1000 * result['in_a_row']:.1f} | {rates[name]:,.0f} "
            f"| {mfu} | {result['first_step']:.1f} | {result['loss']:.3f} |"
        )
    for ours, target in (("ours_jax", 1.2), ("ours_torch_compiled", 0.8)):
        if ours in rates and "torch_compiled" in rates:
            ratio = rates[ours] / rates["torch_compiled"]
            each = waited[ours] / waited["torch_compiled"]
            verdict = "met" if ratio >= target else "missed"
            print(
                f"\n{ours} / torch_compiled: {ratio:.2f}x in a row, {each:.2f}x each waited "
                f"for (target {target}x: {verdict})"
            )
    return rates


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="base", choices=tuple(SHAPES))
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=tuple(ROWS))
    for name in ("vocab", "batch", "source_len", "target_len"):
        parser.add_argument(f"--{name}", type=int, help="default: the preset's")
    parser.add_argument("--precision", choices=("bf16", "fp32"), help="default: the preset's")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--row_timeout", type=float, default=600.0, help="seconds per row")
    parser.add_argument("--peak_tflops", type=float, help="the device's peak, for the MFU")
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
        **shape,
    )
    results = {}
    for name in args.rows:
        results[name] = run_row(name, spec, args.row_timeout)
        print(f"{name}: {results[name]}", flush=True)
    report(results, spec, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"spec": spec, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()

"""Runs every measurement in a fresh subprocess and writes the report.

A measurement is a worker (a function `spec -> dict`) named in `WORKERS`;
the driver passes it a JSON spec on the command line of
`benchmarks/compare.py --worker` and reads back one `RESULT {...}` line.
"""

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from comparison import flops
from comparison import ours
from comparison import peer_ctranslate2
from comparison import peer_keras_hub
from comparison import peer_torch
from comparison import served
from comparison.measure import peak_rss_mib
from comparison.report import format_report
from comparison.report import setting_text
from comparison.workload import CONFIGS
from comparison.workload import DECODE_SHAPES
from comparison.workload import TARGET_LEN
from comparison.workload import TRAIN_BATCH
from comparison.workload import special_ids

ENTRY_POINT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "compare.py"
)
PEER_MODULES = {
    "keras_hub": "keras_hub",
    "torch": "torch",
    "ctranslate2": "ctranslate2",
    # CTranslate2 running our model through export.export_ctranslate2's conversion.
    "ctranslate2_converted": "ctranslate2",
}
WORKERS = {
    "ceiling": flops.worker_ceiling,
    "ours/train": ours.worker_train,
    "ours/decode": ours.worker_decode,
    "ours/memory": ours.worker_memory,
    "ours/copy": ours.worker_copy,
    "keras_hub/train": peer_keras_hub.worker_train,
    "keras_hub/decode": peer_keras_hub.worker_decode,
    "torch/train": peer_torch.worker_train,
    "ctranslate2/decode": peer_ctranslate2.worker_decode,
    "ctranslate2/converted": peer_ctranslate2.worker_converted,
    "served/decode": served.worker_session,
    "served_load/decode": served.worker_load,
}
# Ours as served: the same search without XLA in a SavedModel, run by the TF1
# session loader (TF Serving's) and by tf.saved_model.load.
SERVED = ("served", "served_load")
# (task, implementation, precision, worker) of every timed row.
ROWS = [
    ("train", "ours", "fp32", "ours/train"),
    ("train", "ours", "bf16", "ours/train"),
    ("greedy", "ours", "fp32", "ours/decode"),
    ("beam4", "ours", "fp32", "ours/decode"),
    ("beam4_single", "ours", "fp32", "ours/decode"),
    *(
        (task, impl, "fp32", f"{impl}/decode")
        for impl in SERVED
        for task in ("greedy", "beam4", "beam4_single")
    ),
    ("train", "keras_hub", "fp32", "keras_hub/train"),
    ("train", "keras_hub", "bf16", "keras_hub/train"),
    ("greedy", "keras_hub", "fp32", "keras_hub/decode"),
    ("train", "torch", "fp32", "torch/train"),
    ("train", "torch", "bf16", "torch/train"),
    ("greedy", "ctranslate2", "fp32", "ctranslate2/decode"),
    ("greedy", "ctranslate2", "int8", "ctranslate2/decode"),
    ("beam4", "ctranslate2", "fp32", "ctranslate2/decode"),
    ("beam4", "ctranslate2", "int8", "ctranslate2/decode"),
    ("beam4_single", "ctranslate2", "fp32", "ctranslate2/decode"),
    ("beam4", "ctranslate2_converted", "fp32", "ctranslate2/converted"),
    ("beam4", "ctranslate2_converted", "int8", "ctranslate2/converted"),
]


def run_worker(spec):
    """In the worker process: runs the worker and prints its result."""
    result = WORKERS[spec["worker"]](spec)
    result["peak_rss_mib"] = peak_rss_mib()
    print("RESULT " + json.dumps(result), flush=True)


def run_subprocess(spec, timeout):
    """Runs one worker in a fresh Python process; its result, or `error`."""
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, ENTRY_POINT, "--worker", json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
            result["wall_s"] = time.perf_counter() - start
            return result
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
    return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}


def _native_bf16():
    """Whether bf16 runs natively here: a GPU, or a CPU with bf16 units."""
    import tensorflow as tf

    from keras_transformer.training.devices import cpu_has_native_bf16

    return bool(tf.config.list_physical_devices("GPU")) or cpu_has_native_bf16()


def measured_precisions(bf16):
    """The precisions to measure for `--bf16 auto|yes|no`, and the note that
    says why bf16 is left out (`None` when it is not)."""
    if bf16 == "yes" or (bf16 == "auto" and _native_bf16()):
        return ("fp32", "bf16"), None
    if bf16 == "no":
        return ("fp32",), "bf16 rows skipped: --bf16 no"
    return ("fp32",), (
        "bf16 rows skipped: this CPU has no native bf16 (no AMX, AVX512-BF16 or Arm BF16) and "
        "no GPU is visible, so TensorFlow would emulate it (--bf16 yes runs them)"
    )


def installed(peer):
    return importlib.util.find_spec(PEER_MODULES[peer]) is not None


def plan(args):
    """`((task, implementation, precision), spec)` for every timed row of
    the implementations in `args.only`, in the order they run."""
    base = dict(cfg=CONFIGS[args.config], warmup=args.warmup, steps=args.steps, ids=special_ids())
    return [
        (
            (task, impl, precision),
            dict(base, worker=worker, precision=precision, decode=DECODE_SHAPES.get(task)),
        )
        for task, impl, precision, worker in ROWS
        if impl in args.only and task in args.tasks
    ]


def _measure_row(cfg, label, spec, timeout):
    """One fresh-process measurement of the row `label` (a peer's at each
    of its settings, the fastest kept), with its median time, tokens/s and
    GFLOP/s."""
    task, impl, precision = label
    settings = peer_settings(impl, task)
    result = _fastest(spec, settings, timeout) if settings else run_subprocess(spec, timeout)
    row = {"task": task, "impl": impl, "precision": precision, **result}
    if "times" not in result:
        print(f"{task:6} {impl:12} {precision}: {result.get('error')}", flush=True)
        return row
    _set_speed(row, cfg, spec, statistics.median(result["times"]))
    print(
        f"{task:6} {impl:12} {precision}: {row['tokens_per_s']:10,.0f} tokens/s "
        f"(median {row['median_s'] * 1000:.0f} ms, peak {result['peak_rss_mib']:,.0f} MiB)",
        flush=True,
    )
    return row


def peer_settings(impl, task):
    """The settings a peer's row runs at, each in a process of its own, the
    fastest kept (as its users run it at their best): CTranslate2 over its
    `(inter_threads, intra_threads)` grid and `max_batch_size` (its own
    batching of the call's sentences, which `inter_threads` translate in
    parallel); keras-hub (TensorFlow's intra-op threads) and PyTorch over
    their thread counts. `None` for ours (its defaults)."""
    from script_workers import thread_counts

    if impl in ("ctranslate2", "ctranslate2_converted"):
        batch = DECODE_SHAPES[task]["batch"]
        sizes = sorted({size for size in (16, 32, batch) if size <= batch})
        return [
            {"inter": inter, "threads": intra, "max_batch_size": size}
            for inter, intra in peer_ctranslate2.thread_grid()
            for size in sizes
        ]
    if impl in ("keras_hub", "torch"):
        return [{"threads": threads} for threads in thread_counts()]
    return None


def _fastest(spec, settings, timeout):
    """`spec` run once per setting (a dict merged into it), each in a fresh
    process: the result with the lowest median time, with its `"setting"`
    and every setting's median in `"by_setting"`."""
    best, medians = None, {}
    for setting in settings:
        result = run_subprocess({**spec, **setting}, timeout)
        if "times" not in result:
            return result
        median = statistics.median(result["times"])
        medians[setting_text(setting)] = median
        if best is None or median < statistics.median(best["times"]):
            best = {**result, "setting": setting}
    best["by_setting"] = medians
    return best


def _set_speed(row, cfg, spec, median):
    """Sets `row`'s `median_s`, `tokens_per_s` and `gflops` for a call of
    `median` seconds."""
    if row["task"] == "train":
        tokens, work = TRAIN_BATCH * TARGET_LEN, flops.train_flops(cfg)
    else:
        tokens, work = row["tokens"], flops.decode_flops(cfg, spec["decode"])
    row.update(median_s=median, tokens_per_s=tokens / median, gflops=work / median / 1e9)


def merge_rounds(cfg, spec, rounds):
    """One row from the measurements of the same row in several rounds: the
    median of the rounds' medians (a round that ran while the machine was
    busy moves it less than it moves a mean), with every round's median
    kept in `round_medians_s` and every call in `times`. A round that
    failed is left out; if all failed, the first failure is the row."""
    done = [r for r in rounds if "median_s" in r]
    if len(rounds) == 1 or not done:
        return rounds[0]
    row = dict(done[0])
    row["round_medians_s"] = [r["median_s"] for r in done]
    row["times"] = [t for r in done for t in r["times"]]
    row["peak_rss_mib"] = max(r["peak_rss_mib"] for r in done)
    _set_speed(row, cfg, spec, statistics.median(row["round_medians_s"]))
    return row


def _parser(description):
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    implementations = ["ours", *SERVED, *PEER_MODULES]
    parser.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per measurement (>= 5)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure every row this many times, in turn (each round runs through all the rows), "
        "and report the median of the rounds' medians: steadier ratios on a noisy machine",
    )
    parser.add_argument("--only", nargs="+", default=implementations, choices=implementations)
    tasks = ("train", "greedy", "beam4", "beam4_single")
    parser.add_argument("--tasks", nargs="+", default=list(tasks), choices=tasks)
    parser.add_argument("--memory_calls", type=int, default=1000, help="0: no memory check")
    parser.add_argument("--copy_steps", type=int, default=200, help="0: no bf16 copy-task check")
    parser.add_argument(
        "--bf16",
        choices=("auto", "yes", "no"),
        default="auto",
        help="bf16 rows (auto: only where the CPU multiplies bf16 natively or a GPU is present; "
        "elsewhere TensorFlow emulates it and each row takes up to --timeout)",
    )
    parser.add_argument("--json", help="results file (default: compare_<config>.json)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per measurement")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    return parser


def main(description=None):
    parser = _parser(description)
    args = parser.parse_args()
    if args.worker:
        return run_worker(json.loads(args.worker))
    if args.steps < 5:
        parser.error(f"--steps must be at least 5. Received: --steps={args.steps}")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1. Received: --rounds={args.rounds}")
    cfg = CONFIGS[args.config]
    skipped = [p for p in PEER_MODULES if p in args.only and not installed(p)]
    for peer in skipped:
        print(f'skipping {peer}: not installed (pip install -e ".[bench]")', flush=True)
    args.only = [x for x in args.only if x not in skipped]
    machine = {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count()}
    report = dict(config=dict(cfg, name=args.config), machine=machine, steps=args.steps)
    report.update(warmup=args.warmup, rounds=args.rounds, skipped=skipped, ceilings={}, rows=[])
    precisions, note = measured_precisions(args.bf16)
    if note:
        report["bf16_skipped"] = note
        print(note, flush=True)
    started = time.perf_counter()

    def ceilings(when):
        for precision in precisions:
            result = run_subprocess(dict(worker="ceiling", precision=precision), args.timeout)
            report["ceilings"][f"{precision}_{when}"] = result
            gflops = result.get("gflops", float("nan"))
            print(f"ceiling {precision} ({when}): {gflops:.0f} GFLOP/s", flush=True)

    ceilings("start")
    timed = [(label, spec) for label, spec in plan(args) if label[2] in (*precisions, "int8")]
    measured = {label: [] for label, _ in timed}
    for round_index in range(args.rounds):
        if args.rounds > 1:
            print(f"round {round_index + 1} of {args.rounds}", flush=True)
        for label, spec in timed:
            measured[label].append(_measure_row(cfg, label, spec, args.timeout))
    report["rows"] = [merge_rounds(cfg, spec, measured[label]) for label, spec in timed]
    ids = special_ids()
    if "ours" in args.only and args.copy_steps and "bf16" in precisions:
        copy = dict(worker="ours/copy", copy_steps=args.copy_steps, copy_vocab=30, copy_length=8)
        report["bf16_copy_task"] = {
            precision: run_subprocess(dict(copy, precision=precision, ids=ids), args.timeout)
            for precision in ("fp32", "bf16")
        }
    if "ours" in args.only and args.memory_calls:
        memory = dict(worker="ours/memory", cfg=cfg, calls=args.memory_calls, ids=ids)
        report["memory"] = run_subprocess(memory, args.timeout)
    ceilings("end")
    report["wall_s"] = time.perf_counter() - started

    print("\n" + format_report(report))
    path = args.json or f"compare_{args.config}.json"
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
    print(f"\nwrote {path}")

"""Runs the rows of the export benchmarks (`ctranslate2_translation.py`,
`on_device.py`, `distillation.py`), each in a process of its own, and at
each runtime's fastest setting: every setting of a grid is run in a fresh
process, the fastest kept for batches and, on its own, for one sentence
at a time, and the whole grid printed under the table.

A setting is `(label, inter, intra)`: `inter` runs in parallel (CTranslate2's
`inter_threads`, ONNX Runtime's inter-op threads) of `intra` threads each
(CTranslate2's `intra_threads`, ONNX Runtime's intra-op threads, LiteRT's
`num_threads`). A script's worker gets them as `--inter` and `--threads`.

Example:

>>> fastest("LiteRT float32", path, work, 100, "on_device.py", intra_settings("num_threads"))
{"batch": 49.4, "batch_setting": "num_threads 2", "single": 46.7, ...}
"""

import json
import os
import subprocess
import sys

from script_workers import thread_counts


def intra_settings(label="intra_threads"):
    """One setting per intra-op thread count (`thread_counts()`), e.g.
    `("num_threads 2", 1, 2)`."""
    return [(f"{label} {threads}", 1, threads) for threads in thread_counts()]


def grid_settings(name):
    """One setting per `(inter, intra)` pair whose product the cores allow
    (`peer_ctranslate2.thread_grid`), labelled by `name(inter, intra)`."""
    from comparison.peer_ctranslate2 import thread_grid

    return [(name(inter, intra), inter, intra) for inter, intra in thread_grid()]


def run_row(row, path, work, single, script, threads=None, inter=1):
    """`script`'s worker for `row` in a fresh process, on `inter` x
    `threads` threads (default: every core): its result
    (`work/result.json`: `"outputs"`, `"batch"` and `"single"` sentences/s,
    and CTranslate2's `"by_batching"` and `"batching"`), or the reason it
    failed."""
    result = os.path.join(work, "result.json")
    if os.path.exists(result):
        os.remove(result)
    command = [sys.executable, os.path.abspath(script), "--worker", row, "--path", path]
    command += ["--work", work, "--single", str(single)]
    command += ["--threads", str(threads or os.cpu_count()), "--inter", str(inter)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["no output"]
        return f"failed: exit {done.returncode}: {lines[-1]}"
    with open(result) as f:
        return json.load(f)


def fastest(row, path, work, single, script, settings):
    """`run_row` once per setting of `settings`, each in its own process:
    the result with each speed the fastest (the outputs of the fastest in
    batches), `"batch_setting"` and `"single_setting"` naming what gave
    them (with CTranslate2's batching where it chose one), and `"grid"`:
    every setting's speeds; or the reason a run failed."""
    best, grid = None, {}
    for label, inter, intra in settings:
        result = run_row(row, path, work, single, script, intra, inter)
        if isinstance(result, str):
            return f"{result} ({label})"
        speeds = result.get("by_batching", {"batches": result["batch"]})
        grid[label] = {**speeds, "one at a time": result["single"]}
        if best is None or result["batch"] > best["batch"]:
            best = {**(best or result), "outputs": result["outputs"], "batch": result["batch"]}
            batching = result.get("batching")
            best["batch_setting"] = label if batching is None else f"{label}, {batching}"
        if "single_setting" not in best or result["single"] > best["single"]:
            best["single"], best["single_setting"] = result["single"], label
    best["grid"] = grid
    return best


def run_at_best(row, path, work, single, script, settings=None):
    """`fastest` over `settings`, or one `run_row` on every core without."""
    if settings is None:
        return run_row(row, path, work, single, script)
    return fastest(row, path, work, single, script, settings)


def grid_notes(row, result):
    """Lines with every setting's sentences/s of a row run by `fastest`."""
    return [
        f"{row}, {label}: " + "; ".join(f"{key} {rate:.1f}" for key, rate in speeds.items())
        for label, speeds in result.get("grid", {}).items()
    ]


def speed(result, key):
    """A row's sentences/s (`"batch"` or `"single"`), with the setting
    that gave it where `fastest` chose one."""
    setting = result.get(f"{key}_setting")
    return f"{result[key]:.1f}" + ("" if setting is None else f" ({setting})")

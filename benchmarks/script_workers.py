"""A benchmark script's measurements, each in a fresh process: the script
runs itself with `--worker NAME`, and the worker prints one JSON object on
its last line of output."""

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile


def run_worker(script, name, arguments=(), environment=None):
    """Runs `python script --worker name *arguments` and returns the JSON
    object the worker printed last.

    Args:
        script: the script's path (its `__file__`).
        name: the worker's name (what it measures).
        arguments: further command-line arguments for the worker.
        environment: extra environment variables (e.g. `KERAS_BACKEND`).

    Example:

    >>> run_worker(__file__, "mirrored", ["--steps", "20"])["step_ms"]
    """
    finished = subprocess.run(
        [sys.executable, script, "--worker", name, *arguments],
        env={**os.environ, **(environment or {})},
        capture_output=True,
        text=True,
    )
    if finished.returncode:
        tail = "\n".join(finished.stderr.strip().splitlines()[-30:])
        raise RuntimeError(
            f"worker {name!r} of {script} exited with {finished.returncode}; its stderr "
            f"ends:\n{tail}"
        )
    return json.loads(finished.stdout.strip().splitlines()[-1])


def scratch_directory(prefix):
    """A new temporary directory for the script's exports and files,
    removed when the script exits (a Multi30k benchmark writes hundreds of
    MB there).

    Example:

    >>> work = scratch_directory("on_device_")
    """
    work = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    return work


def thread_counts():
    """The intra-op thread counts a peer's row runs with, each in its own
    process, so that it is measured at its fastest: 1, 2, 4, ... and all
    cores."""
    cores = os.cpu_count() or 1
    return sorted({cores} | {2**i for i in range(cores.bit_length()) if 2**i < cores})

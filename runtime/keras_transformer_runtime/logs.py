"""Quiet start-up: the native libraries' own log lines (TensorFlow's absl,
oneDNN and CUDA probes, SentencePiece's INFO lines) kept off stderr unless
asked for (`show_native_logs(True)`, the commands' `--verbose`).

Those lines come from C++ before Python's logging is involved, so they
are hidden by pointing file descriptor 2 at the null device while a
library loads (`native_logs_hidden`), and by SentencePiece's own minimum
level. Python's warnings, raised afterwards, still show.

Example:

>>> with native_logs_hidden():
...     import tensorflow  # no "oneDNN custom operations" line
"""

import contextlib
import os
import sys
import threading

_shown = False
# File descriptor 2 is the process's: threads that hide it at once share
# one redirection, undone when the last of them leaves.
_lock = threading.Lock()
_hiding = {"depth": 0, "saved": None}


def show_native_logs(shown=True):
    """Whether the native libraries' start-up lines reach stderr (default:
    not)."""
    global _shown
    _shown = bool(shown)


def native_logs_shown():
    """`True` where `show_native_logs(True)` was called."""
    return _shown


@contextlib.contextmanager
def native_logs_hidden():
    """Runs its block with stderr's file descriptor on the null device
    (unless `show_native_logs(True)`): what C++ code writes there is
    dropped. Python's `sys.stderr` is flushed first, and restored after;
    blocks on several threads at once restore it when the last ends."""
    if _shown:
        yield
        return
    with _lock:
        if _hiding["depth"] == 0:
            _hiding["saved"] = _redirect_to_null()
        _hiding["depth"] += 1
    try:
        yield
    finally:
        with _lock:
            _hiding["depth"] -= 1
            if _hiding["depth"] == 0 and _hiding["saved"] is not None:
                os.dup2(_hiding["saved"], 2)
                os.close(_hiding["saved"])
                _hiding["saved"] = None


def _redirect_to_null():
    """Points file descriptor 2 at the null device; the former one (a
    duplicate), or `None` where there is no descriptor 2."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no file descriptor 2 (an embedded interpreter)
        return None
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)
    return saved


def sentencepiece_level():
    """SentencePiece's minimum log level: 0 (INFO) when shown, else 1
    (WARNING), which drops its `normalizer.cc ... LOG(INFO)` lines."""
    return 0 if _shown else 1


# Log lines that say nothing a user must act on: absl's note that logging
# is not initialized, INFO lines (oneDNN, CUDA drivers not found, CPU
# features), a CPU machine's failed CUDA probe, oneDNN's fallback for
# int64, the CPU-feature advice, SentencePiece's INFO lines, and Apache
# Beam's worker processes' start-up and shut-down chatter (the corpus
# pipeline's own lines, `INFO:root:shard ...`, pass).
NOISE = (
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|I\d{4} [\d:.]+ +\d+ \S+\] "
    r"|E\d{4} [\d:.]+ +\d+ \S+\] failed call to cuInit"
    r"|E\d{4} [\d:.]+ +\d+ \S+\] oneDNN supports DT_INT64 only"
    r"|To enable the following instructions: .* with the appropriate compiler flags\."
    r"|normalizer\.cc\(\d+\) LOG\(INFO\) "
    r"|INFO:(apache_beam\.\S+|__main__):"
    r"|WARNING:root:apitools not found"
    r"|WARNING:\S+:.*No semi_persistent_directory found)"
)
# Where a native log line may start: a line beginning so is held until it
# ends, to be filtered whole; any other text passes at once (progress lines
# that `\r` rewrites included).
_NOISE_START = r"^(WARNING|INFO|[IE]\d|To enable|normalizer\.cc)"
# The filter, run as a process of its own, so that a line written just
# before this process dies (an abort, a crash) still gets through.
_FILTER = r"""
import os, re, sys
noise, start = re.compile(sys.argv[1].encode()), re.compile(sys.argv[2].encode())
held, passing = b"", False
while True:
    data = os.read(0, 65536)
    if not data:
        break
    held += data
    parts = re.split(rb"(?<=[\r\n])", held)
    held = parts.pop()
    out = []
    for line in parts:
        if passing or not noise.search(line):
            out.append(line)
        passing = False
    if held and (passing or not start.search(held)):
        out.append(held)
        held, passing = b"", True
    if out:
        os.write(1, b"".join(out))
if held and not noise.search(held):
    os.write(1, held)
"""


def filter_native_logs(argv=None):
    """From now on, this process's stderr, and its child processes', goes
    through a filter that drops the native libraries' `NOISE` lines
    (unless `--verbose` is in `argv`, default `sys.argv`, or
    `show_native_logs(True)`); everything else passes at once, Python's
    warnings and tracebacks included. The filter is a process of its own:
    it forwards what was written even after this process dies. At exit,
    this process waits (5 s at most) for it to forward the rest.

    Call it before importing TensorFlow (its import writes such lines).

    Example:

    >>> filter_native_logs()
    >>> import tensorflow  # no start-up lines on stderr
    """
    if "--verbose" in (sys.argv[1:] if argv is None else argv):
        show_native_logs(True)
    if _shown:
        return None
    import atexit
    import subprocess

    sys.stderr.flush()
    read, write = os.pipe()
    saved = os.dup(2)
    command = [sys.executable, "-c", _FILTER, NOISE, _NOISE_START]
    process = subprocess.Popen(command, stdin=read, stdout=saved, stderr=saved)
    os.close(read)
    os.dup2(write, 2)
    os.close(write)

    def restore():
        sys.stderr.flush()
        os.dup2(saved, 2)  # the filter reads to the end once no one else writes
        os.close(saved)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # a child process still writes into it
            pass

    atexit.register(restore)
    return process

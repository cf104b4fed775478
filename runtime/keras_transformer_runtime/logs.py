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

"""The native libraries' log lines: hidden around a load
(`native_logs_hidden`), filtered out of a whole process's stderr
(`filter_native_logs`), and both shown with `--verbose`."""

import subprocess
import sys
import textwrap

import pytest

from keras_transformer_runtime import logs

pytestmark = pytest.mark.large  # starts Python processes

NOISE = [
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
    b"I0000 00:00:1795961013.991794   10509 port.cc:153] oneDNN custom operations are on.\n",
    b"E0000 00:00:1795962141.822270   20611 cuda_platform.cc:52] failed call to cuInit: "
    b"INTERNAL: CUDA error\n",
    b"To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild "
    b"TensorFlow with the appropriate compiler flags.\n",
    b"normalizer.cc(51) LOG(INFO) precompiled_charsmap is empty. use identity normalization.\n",
    b"INFO:apache_beam.runners.worker.sdk_worker:Control channel established.\n",
    b"INFO:__main__:Python sdk harness starting.\n",
    b"WARNING:root:apitools not found, and bigquery client libraries are not available.\n",
    b"WARNING:__main__:No semi_persistent_directory found:  User registered objects\n",
]
KEPT = [
    b"W0000 00:00:1.0   1 allocator.cc:1] Allocation exceeds 10% of free system memory.\n",
    b"E0000 00:00:1.0   1 session.cc:1] Not found: a real error\n",
    b"warning: 2 line(s) had a sentence longer than max_input_length\n",
    b"INFO:root:shard 0 of input 0: 2000 lines translated, 0 errors, 647.2 lines/s\n",
    b"WARNING:root:a warning of the pipeline's own\n",
]


def run(body, *args):
    """`body` run in a Python process after `filter_native_logs()`; its
    stderr (bytes) and exit code."""
    script = "import os, sys\nfrom keras_transformer_runtime import logs\n"
    script += "logs.filter_native_logs()\n" + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, timeout=60)
    return done.stderr, done.returncode


def test_noise_is_dropped_and_everything_else_passes_in_order():
    lines = [NOISE[0], KEPT[0], NOISE[1], NOISE[2], KEPT[1], NOISE[3], NOISE[4], KEPT[2]]
    lines += [NOISE[5], KEPT[3], NOISE[6], NOISE[7], KEPT[4], NOISE[8]]
    body = f"for line in {lines!r}:\n    os.write(2, line)\n"
    body += "print('progress: 1/2', end='', file=sys.stderr, flush=True)\n"
    body += "print('\\rprogress: 2/2', file=sys.stderr)\n"
    body += "raise RuntimeError('a traceback passes')\n"
    err, code = run(body)
    assert code == 1
    assert err.startswith(b"".join(KEPT) + b"progress: 1/2\rprogress: 2/2\nTraceback")
    assert err.endswith(b"RuntimeError: a traceback passes\n")


def test_what_was_written_before_an_abort_gets_through():
    err, code = run("os.write(2, b'the last words\\n')\nos.abort()\n")
    assert code != 0 and err == b"the last words\n"


def test_verbose_shows_every_line():
    body = f"os.write(2, b''.join({NOISE!r}))\n"
    assert run(body, "--verbose")[0] == b"".join(NOISE)
    assert run(body)[0] == b""


def test_hidden_around_a_block_shown_after_it():
    script = textwrap.dedent(
        """
        import os, sys
        from keras_transformer_runtime import logs
        with logs.native_logs_hidden():
            os.write(2, b"hidden\\n")
        os.write(2, b"shown\\n")
        logs.show_native_logs(True)
        with logs.native_logs_hidden():
            os.write(2, b"verbose\\n")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert done.stderr == b"shown\nverbose\n"
    assert logs.sentencepiece_level() == 1 and not logs.native_logs_shown()

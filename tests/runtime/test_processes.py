"""Whether a process runs: this one does, a pid no process can have does
not; and an exit that skips the collector's last pass."""

import os
import subprocess
import sys

from keras_transformer_runtime.processes import is_running


def test_a_running_process_and_a_pid_past_the_last():
    assert is_running(os.getpid())
    with open("/proc/sys/kernel/pid_max") as f:
        beyond = int(f.read())  # pids are below pid_max
    assert not is_running(beyond)


EXITING = """
import atexit, gc, sys
from keras_transformer_runtime.processes import skip_collection_at_exit

class Cycle:
    def __init__(self):
        self.me = self
    def __del__(self):
        print("collected", flush=True)

gc.disable()  # the cycle stays until the collector's last pass, at exit
atexit.register(print, "atexit ran", flush=True)
Cycle()
if sys.argv[1] == "skip":
    skip_collection_at_exit()
    skip_collection_at_exit()
"""


def _exit_output(mode):
    done = subprocess.run(
        [sys.executable, "-c", EXITING, mode], capture_output=True, text=True, check=True
    )
    return done.stdout.split("\n")[:-1]


def test_an_exit_that_skips_the_last_collection_leaves_cycles_unfinalized():
    # The collector's last pass finalizes the cycle; skipped, it does not,
    # and the handlers registered before still run.
    assert _exit_output("collect") == ["atexit ran", "collected"]
    assert _exit_output("skip") == ["atexit ran"]

"""Whether a process runs: this one does, a pid no process can have does
not."""

import os

from keras_transformer_runtime.processes import is_running


def test_a_running_process_and_a_pid_past_the_last():
    assert is_running(os.getpid())
    with open("/proc/sys/kernel/pid_max") as f:
        beyond = int(f.read())  # pids are below pid_max
    assert not is_running(beyond)

"""Timing and memory of the current process."""

import os
import resource
import time


def time_calls(step, warmup, steps):
    """Runs `step()` `warmup` times untimed, then `steps` times; returns
    the seconds of each timed call."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def peak_rss_mib():
    """The process's peak resident set size so far, MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def rss_mib():
    """The process's resident set size now, MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def quiet_tensorflow():
    """Keeps TensorFlow's C++ logs out of a worker's output."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

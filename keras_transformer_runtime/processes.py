"""What this host knows of other processes, without TensorFlow."""

import os


def is_running(pid):
    """Whether process `pid` of this host is running (a process of another
    user, which this one may not signal, counts as running).

    Example:

    >>> is_running(os.getpid())
    True
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

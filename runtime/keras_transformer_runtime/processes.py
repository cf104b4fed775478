"""What this host knows of other processes, and how this one exits,
without TensorFlow."""

import atexit
import gc
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


def _freeze_collector():
    gc.freeze()


def skip_collection_at_exit():
    """Makes this process's exit skip the garbage collector's last pass,
    which walks every live object: a process with a TensorFlow model
    loaded spends seconds in it on its way out, for memory the operating
    system takes back anyway. `atexit` handlers still run and files are
    still flushed; objects left in reference cycles at exit are not
    finalized, which Python never promises. For worker processes that
    exit when their work is done; calling it again does nothing more.

    Example:

    >>> skip_collection_at_exit()  # in a worker, once its model is loaded
    """
    atexit.unregister(_freeze_collector)
    atexit.register(_freeze_collector)

"""Loading the example scripts, which are modules of `examples/`, not of
the package."""

import importlib
import os
import sys

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "examples")


def load_example(name):
    """The module `examples/<name>.py`, imported the way the scripts import
    each other (their folder first on `sys.path`)."""
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    return importlib.import_module(name)

"""Which Keras backend runs, and the guard on what needs TensorFlow.

The layers, `Transformer`, the loss, the metrics and the schedule are
written with `keras.ops` and run on every Keras 3 backend. The input
pipeline (`tf.data`), the training loop (`tf.distribute`), the searches
(`tf.while_loop`), the in-graph tokenizer (TF Text), `Translator` and the
exports are TensorFlow by design: under another backend they raise
`BackendError` at once instead of failing somewhere inside.
"""

import contextlib
import functools
import threading

import keras


class BackendError(RuntimeError):
    """A TensorFlow-only part of the package was called while Keras runs on
    another backend (`KERAS_BACKEND=jax` or `torch`)."""


def is_tensorflow():
    """Whether Keras runs on the TensorFlow backend."""
    return keras.backend.backend() == "tensorflow"


def require_tensorflow(what, why):
    """Raises `BackendError` unless Keras runs on TensorFlow.

    Args:
        what: the name the user called, e.g. `"training.train"`.
        why: what in it is TensorFlow, e.g. `"tf.distribute"`.
    """
    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise BackendError(
            f"`{what}` needs the TensorFlow backend ({why}); Keras is running on "
            f"{backend!r}. Set KERAS_BACKEND=tensorflow before Keras is imported, "
            "or use the layers and `Transformer` (encode, decode_step), which run "
            "on every backend."
        )


def tensorflow_only(what, why):
    """Decorates a function (or a class's `__init__`) with
    `require_tensorflow(what, why)`.

    Example:

    >>> @tensorflow_only("training.train", "tf.distribute and tf.data")
    ... def train(model, batches): ...
    """

    def decorate(function):
        @functools.wraps(function)
        def guarded(*args, **kwargs):
            require_tensorflow(what, why)
            return function(*args, **kwargs)

        return guarded

    return decorate


def compiling_with_xla():
    """Whether TensorFlow code traced now will be compiled by XLA: inside a
    `tf.function(jit_compile=True)`, or a function or loop it calls. XLA
    needs static shapes and compile-time slice bounds, which a plain graph
    (what stock TF Serving runs) does not: code that can do better without
    them asks this while it is traced. `False` on other backends."""
    if not is_tensorflow():
        return False
    from tensorflow.python.framework import ops
    from tensorflow.python.ops import control_flow_util

    return control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph())


_conversion = threading.local()


@contextlib.contextmanager
def tracing_for_conversion(fixed_shapes=False):
    """Code traced inside (in this thread) is for a converter to another
    runtime (LiteRT, ONNX), which knows the common TensorFlow ops only: the
    layers leave out the TensorFlow-only kernels of `_graph_kernels`; with
    `fixed_shapes`, the searches keep their shapes from step to step, as
    under XLA (no loop whose tensors change size, no loop inside a loop).

    A `tf.function` traced before keeps its graph: trace a new one inside.

    Example:

    >>> with tracing_for_conversion(fixed_shapes=True):
    ...     concrete = tf.function(search).get_concrete_function(spec)
    """
    previous = getattr(_conversion, "target", None)
    _conversion.target = {"fixed_shapes": bool(fixed_shapes)}
    try:
        yield
    finally:
        _conversion.target = previous


def tracing_for_another_runtime():
    """Whether code traced now is for a converter (`tracing_for_conversion`)."""
    return getattr(_conversion, "target", None) is not None


def tracing_fixed_shapes():
    """Whether the searches traced now must keep their shapes from step to
    step: under XLA, or for a converter that asks for it."""
    target = getattr(_conversion, "target", None)
    return compiling_with_xla() or bool(target and target["fixed_shapes"])

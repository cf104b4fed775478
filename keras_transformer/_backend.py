"""Which Keras backend runs, and the guard on what needs TensorFlow.

The layers, `Transformer`, the loss, the metrics and the schedule are
written with `keras.ops` and run on every Keras 3 backend, with TensorFlow
installed or not. The input pipeline (`tf.data`), the training loop
(`tf.distribute`), the searches (`tf.while_loop`), the in-graph tokenizer
(TF Text), `Translator` and the exports are TensorFlow by design: under
another backend they raise `BackendError` at once instead of failing
somewhere inside, and the packages import them only when first used
(`TensorFlowParts`), so that a machine without TensorFlow (a GPU box with
JAX or PyTorch) imports the rest.
"""

import contextlib
import functools
import importlib
import sys
import threading

import keras


class BackendError(RuntimeError):
    """A TensorFlow-only part of the package was called while Keras runs on
    another backend (`KERAS_BACKEND=jax` or `torch`)."""


def is_tensorflow():
    """Whether Keras runs on the TensorFlow backend."""
    return keras.backend.backend() == "tensorflow"


def has_fused_attention(dtype):
    """Whether `keras.ops.dot_product_attention` runs a fused kernel for
    `dtype` tensors on the running backend: JAX (cuDNN's flash attention
    on NVIDIA GPUs, XLA elsewhere; not float16 on a CPU, where XLA has no
    float16 products accumulated in float32) and PyTorch
    (`scaled_dot_product_attention`'s flash, memory-efficient and CPU
    kernels). TensorFlow's is the same composition of ops as the layers'
    own, which also have TensorFlow's graph kernels."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        half = keras.backend.standardize_dtype(dtype) == "float16"
        return not (half and jax.default_backend() == "cpu")
    return backend == "torch"


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


class TensorFlowParts:
    """The names of a package that need TensorFlow, imported when first
    used: a package's `__getattr__` (PEP 562). Without TensorFlow, using
    one raises `BackendError` naming it and what in it needs TensorFlow.

    Args:
        package: the package's `__name__`.
        parts: `{name: (module, why)}`: the module (relative to the
            package) that defines `name`, or is `name` itself when it is
            the module's own last component, and what in it is
            TensorFlow, e.g. `("data", "tf.data")`.

    Example:

    >>> parts = TensorFlowParts(__name__, {"make_batches": ("data", "tf.data")})
    >>> __getattr__, __dir__ = parts.get, parts.names
    """

    def __init__(self, package, parts):
        self.package, self.parts = package, dict(parts)

    def get(self, name):
        if name not in self.parts:
            raise AttributeError(f"module {self.package!r} has no attribute {name!r}")
        module_name, why = self.parts[name]
        try:
            module = importlib.import_module(f"{self.package}.{module_name}")
        except ModuleNotFoundError as error:
            if (error.name or "").split(".")[0] not in TENSORFLOW_MODULES:
                raise
            raise BackendError(
                f"`{self.package}.{name}` needs TensorFlow ({why}), which cannot be imported "
                f"here ({error}). Install it, or use what runs on every Keras backend without "
                "it: the layers, `Transformer`, the loss, the metrics and the schedules."
            ) from error
        value = module if module_name.split(".")[-1] == name else getattr(module, name)
        setattr(sys.modules[self.package], name, value)  # found directly from now on
        return value

    def names(self):
        """The package's `__dir__`: what it holds and what it imports when
        first used."""
        return sorted(set(vars(sys.modules[self.package])) | set(self.parts))


# The modules whose absence `TensorFlowParts` reports as TensorFlow's.
TENSORFLOW_MODULES = ("tensorflow", "tensorflow_text", "tensorflow_datasets", "tf_keras")


def gpu_compute_capabilities():
    """The compute capability `(major, minor)` of each GPU the running
    Keras backend computes on (TensorFlow's physical GPUs, JAX's GPU
    devices, PyTorch's CUDA devices); empty on a CPU. `(0, 0)` where a
    backend does not say."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        details = (tf.config.experimental.get_device_details(gpu) for gpu in gpus)
        return [tuple(d.get("compute_capability") or (0, 0)) for d in details]
    if backend == "jax":
        import jax

        gpus = [d for d in jax.devices() if d.platform == "gpu"]
        return [_version(d.compute_capability) for d in gpus]
    if backend == "torch":
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return [tuple(torch.cuda.get_device_capability(i)) for i in range(count)]
    return []


def _version(text):
    major, _, minor = str(text).partition(".")
    return int(major or 0), int(minor or 0)


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

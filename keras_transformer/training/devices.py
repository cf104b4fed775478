"""Where and in which precision to train: strategies, dtype policies, XLA.

Everything here but `get_strategy` works on every Keras backend, with or
without TensorFlow: the GPUs are the running backend's own.
"""

import platform
import warnings

from keras_transformer import _backend
from keras_transformer_runtime import validation

STRATEGIES = ("auto", "mirrored", "multiworker", "one_device")
MIXED_PRECISION = {"none": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
# CPU flags (Linux /proc/cpuinfo) of native bfloat16 matrix products.
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")


@_backend.tensorflow_only("training.get_strategy", "tf.distribute")
def get_strategy(name="auto"):
    """A `tf.distribute` strategy by name.

    `"auto"`: `MirroredStrategy` over all visible GPUs when there are
    several, else the default one-device strategy; `"mirrored"`: all local
    devices; `"multiworker"`: `MultiWorkerMirroredStrategy` (reads
    `TF_CONFIG`); `"one_device"`: the first GPU, else the CPU.

    Example:

    >>> strategy = get_strategy("auto")
    >>> with strategy.scope():
    ...     model = Transformer.from_preset("base", vocab_size=37000)
    """
    import tensorflow as tf

    validation.check_choice(STRATEGIES, strategy=name)
    gpus = tf.config.list_logical_devices("GPU")
    if name == "mirrored" or (name == "auto" and len(gpus) > 1):
        return tf.distribute.MirroredStrategy()
    if name == "multiworker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if gpus else "/cpu:0")
    return tf.distribute.get_strategy()


def _cpu_flags():
    """The CPU's feature flags (Linux `/proc/cpuinfo`; empty elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_has_native_bf16():
    """Whether this CPU multiplies bfloat16 matrices natively (x86 AMX or
    AVX512-BF16, Arm BF16), where mixed bfloat16 makes training faster;
    elsewhere TensorFlow emulates it, about ten times slower than float32.
    Apple silicon, whose flags are not in `/proc/cpuinfo`, counts as
    without.

    Example:

    >>> cpu_has_native_bf16()
    True
    """
    if platform.system() != "Linux":
        return False
    return bool(_cpu_flags() & set(BF16_CPU_FLAGS))


def recommended_mixed_precision():
    """The precision that trains fastest here without hurting quality:
    `"bf16"` on GPUs that have it (compute capability 8.0 or more) and on
    CPUs with native bfloat16 (`cpu_has_native_bf16`), `"fp16"` on older
    GPUs, `"none"` (float32) elsewhere.

    Example:

    >>> policy = dtype_policy(recommended_mixed_precision())
    """
    capabilities = _backend.gpu_compute_capabilities()
    if capabilities:
        return "bf16" if capabilities[0] == (0, 0) or capabilities[0] >= (8, 0) else "fp16"
    return "bf16" if cpu_has_native_bf16() else "none"


def dtype_policy(mixed_precision="none"):
    """The Keras dtype policy for `"none"`, `"bf16"`, `"fp16"` or `"auto"`
    (`recommended_mixed_precision()`).

    Pass it as `Transformer(..., dtype=policy)`; under `"fp16"` Keras wraps
    the optimizer in a `LossScaleOptimizer` when the model is compiled.
    Asking for `"bf16"` on a CPU without native bfloat16 (and no GPU)
    warns: it is emulated there, and trains about ten times slower.

    Example:

    >>> dtype_policy("bf16")
    'mixed_bfloat16'
    """
    policy = policy_name(mixed_precision)
    if (
        mixed_precision == "bf16"
        and not _backend.gpu_compute_capabilities()
        and not cpu_has_native_bf16()
    ):
        warnings.warn(
            "mixed_precision='bf16' on a CPU without native bfloat16 (no AMX, AVX512-BF16 or "
            "Arm BF16 in its flags): TensorFlow emulates it, about ten times slower than "
            "float32. Use 'none' or 'auto' here.",
            RuntimeWarning,
            stacklevel=2,
        )
    return policy


def policy_name(mixed_precision):
    """The name of `dtype_policy(mixed_precision)`'s policy, without its
    warning (for comparing a model's policy with the one asked for).

    Example:

    >>> policy_name("none")
    'float32'
    """
    validation.check_choice(("auto", *MIXED_PRECISION), mixed_precision=mixed_precision)
    if mixed_precision == "auto":
        return MIXED_PRECISION[recommended_mixed_precision()]
    return MIXED_PRECISION[mixed_precision]


def recommended_jit_compile():
    """Whether to compile a training step with XLA on this machine: on a
    GPU, yes; on a CPU, no, whatever the dtype policy.

    On a GPU, XLA fuses the element-wise work between matrix products. On
    a CPU, TensorFlow's graph runs the products with oneDNN, which is
    faster than XLA:CPU in float32, much faster in bfloat16 (oneDNN uses
    the CPU's bfloat16 units, XLA:CPU does not), and never recompiles for a
    new batch shape (`benchmarks/README.md` has the measurements).

    Example:

    >>> model.compile(..., jit_compile=recommended_jit_compile())
    """
    return bool(_backend.gpu_compute_capabilities())

"""Where and in which precision to train: strategies, dtype policies, XLA."""

import tensorflow as tf

from keras_transformer import _validation

STRATEGIES = ("auto", "mirrored", "multiworker", "one_device")
MIXED_PRECISION = {"none": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


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
    _validation.check_choice(STRATEGIES, strategy=name)
    gpus = tf.config.list_logical_devices("GPU")
    if name == "mirrored" or (name == "auto" and len(gpus) > 1):
        return tf.distribute.MirroredStrategy()
    if name == "multiworker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if gpus else "/cpu:0")
    return tf.distribute.get_strategy()


def dtype_policy(mixed_precision="none"):
    """The Keras dtype policy for `"none"`, `"bf16"` or `"fp16"`.

    Pass it as `Transformer(..., dtype=policy)`; under `"fp16"` Keras wraps
    the optimizer in a `LossScaleOptimizer` when the model is compiled.

    Example:

    >>> dtype_policy("bf16")
    'mixed_bfloat16'
    """
    _validation.check_choice(tuple(MIXED_PRECISION), mixed_precision=mixed_precision)
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
    return bool(tf.config.list_physical_devices("GPU"))

"""`train`: the paper's recipe around `model.fit`, resumable after a crash.

A run lives in `model_dir`:

    model_dir/checkpoints/ckpt-<step>.*   the last `keep_checkpoints` steps
    model_dir/logs/                       TensorBoard

Training is step-based: `model.fit` runs `train_steps / steps_per_checkpoint`
"epochs" of `steps_per_checkpoint` updates over a repeated dataset, and a
checkpoint (model, optimizer, step) is written after each. Rerunning the
same call after a crash restores the latest checkpoint and continues at its
step, so at most one checkpoint interval is repeated; a finished run
returns at once.
"""

import contextlib
import dataclasses
import math
import os
import time

import keras
import numpy as np
import tensorflow as tf

from keras_transformer import _validation
from keras_transformer.training.losses import LabelSmoothedCrossEntropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.metrics import Perplexity
from keras_transformer.training.metrics import TokenCount
from keras_transformer.training.schedules import paper_optimizer

STRATEGIES = ("auto", "mirrored", "multiworker", "one_device")
MIXED_PRECISION = {"none": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


def get_strategy(name="auto"):
    """A `tf.distribute` strategy by name.

    `"auto"`: `MirroredStrategy` over all visible GPUs when there are
    several, else the default one-device strategy; `"mirrored"`: all local
    devices; `"multiworker"`: `MultiWorkerMirroredStrategy` (reads
    `TF_CONFIG`); `"one_device"`: the first GPU, else the CPU.
    """
    _validation.check_choice("strategy", name, STRATEGIES)
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
    """
    _validation.check_choice("mixed_precision", mixed_precision, tuple(MIXED_PRECISION))
    return MIXED_PRECISION[mixed_precision]


def recommended_jit_compile(policy=None):
    """Whether to compile a training step with XLA for `policy` (default:
    Keras's global dtype policy) on this machine: on a GPU, yes; on a CPU,
    no.

    On a GPU, XLA fuses the element-wise work between matrix products. On
    a CPU, TensorFlow's graph runs the products with oneDNN, which beats
    XLA:CPU: by 5-8% for float32 at d_model 256-512 and 4,096 tokens a
    batch, by about 2x for bfloat16, where oneDNN uses the CPU's bfloat16
    units (AVX512-BF16, AMX) and XLA:CPU multiplies at float32 speed, and
    by far for small batches, where XLA also compiles once per batch shape.
    The element-wise hot spot of a step, the loss over the vocabulary, is
    computed with a hand-written gradient either way
    (`LabelSmoothedCrossEntropy`).
    Measurements: `benchmarks/README.md`.

    Example:

    >>> model.compile(..., jit_compile=recommended_jit_compile(model.dtype_policy))
    """
    del policy  # every policy measured on a CPU is faster without XLA
    return bool(tf.config.list_physical_devices("GPU"))


def _checkpoint(model, optimizer=None, step=None):
    """A `tf.train.Checkpoint` of the model's weights as an ordered list.

    Keras 3 layers kept in Python lists (the encoder's and decoder's layer
    stacks) are not reachable through TensorFlow's object graph, so the
    weights are listed explicitly, in `model.weights` order, the same for
    any model built with the same configuration.
    """
    objects = {"model_weights": list(model.weights)}
    if optimizer is not None:
        objects["optimizer_weights"] = list(optimizer.variables)
    if step is not None:
        objects["step"] = step
    return tf.train.Checkpoint(**objects)


def checkpoint_paths(model_dir):
    """Checkpoint prefixes in `model_dir/checkpoints`, oldest first."""
    state = tf.train.get_checkpoint_state(os.path.join(model_dir, "checkpoints"))
    return list(state.all_model_checkpoint_paths) if state else []


def average_checkpoints(model, paths):
    """Sets `model`'s weights to the mean of the checkpoints at `paths`.

    The paper averages the last 5 (base) or 20 (big) checkpoints, written
    at 10-minute intervals. Only model weights are read.

    Returns:
        The model.
    """
    if not paths:
        raise ValueError("`paths` must name at least one checkpoint. Received: paths=[]")
    checkpoint = _checkpoint(model)
    total = None
    for path in paths:
        checkpoint.restore(path).expect_partial().assert_existing_objects_matched()
        weights = [np.asarray(w, dtype=np.float64) for w in model.get_weights()]
        total = weights if total is None else [t + w for t, w in zip(total, weights)]
    model.set_weights([t / len(paths) for t in total])
    return model


def _checkpoint_dir(model_dir, strategy):
    """`model_dir/checkpoints`, except for the non-chief workers of a
    multi-worker strategy: every worker must take part in saving, but only
    the chief's copy is kept, so the others write to a directory of their
    own."""
    resolver = getattr(strategy, "cluster_resolver", None)
    task_type = getattr(resolver, "task_type", None)
    task_id = getattr(resolver, "task_id", 0) or 0
    is_chief = task_type in (None, "chief") or (task_type == "worker" and task_id == 0)
    if is_chief:
        return os.path.join(model_dir, "checkpoints")
    return os.path.join(model_dir, f"worker-{task_id}-checkpoints")


def _read_int(variable):
    """A variable's value as an int, also for a variable mirrored by a
    strategy (where `int(variable)` fails)."""
    return int(keras.ops.convert_to_numpy(variable))


def _with_leading_axis(step_function):
    def step(data):
        return tf.nest.map_structure(
            lambda v: tf.reshape(v, [1]) if v.shape.rank == 0 else v, step_function(data)
        )

    return step


@contextlib.contextmanager
def _multi_worker_fit(model, strategy):
    """Works around two Keras 3 bugs with `MultiWorkerMirroredStrategy`
    (tensorflow/tensorflow#72388); a no-op under any other strategy.

    1. When a model was created under a strategy, `fit` first peeks at one
       batch and averages it over the replicas (`strategy.reduce("MEAN")`)
       to build the model symbolically; across workers that fails on nested
       inputs such as `((source, target_in), target_out)`. Our models are
       built in their constructor and need no peek, so the model forgets its
       strategy during `fit`, which then finds it in the strategy's scope.
    2. Across workers Keras reduces each step output with
       `strategy.reduce("MEAN", value, axis=0)`, which fails on the scalar
       loss and metrics; the steps return them with a leading axis of 1.
    """
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        yield
        return
    saved = model._distribute_strategy
    model._distribute_strategy = None
    model.train_step = _with_leading_axis(type(model).train_step.__get__(model))
    model.test_step = _with_leading_axis(type(model).test_step.__get__(model))
    try:
        with strategy.scope():
            yield
    finally:
        model._distribute_strategy = saved
        del model.train_step, model.test_step


class TrainingDivergedError(FloatingPointError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


class _RunState(keras.callbacks.Callback):
    """Checkpoints every interval; stops on NaN; stops at `train_steps`;
    adds `learning_rate` and `tokens_per_sec` to the logs (progress bar,
    TensorBoard)."""

    def __init__(self, manager, step_variable, train_steps, max_seconds=None):
        super().__init__()
        self.manager = manager
        self.step = step_variable
        self.train_steps = train_steps
        self.max_seconds = max_seconds
        self.diverged_at = None
        self.out_of_time = False
        self._time = None
        self._start = time.perf_counter()

    def _updates(self):
        return _read_int(self.model.optimizer.iterations)

    def on_epoch_begin(self, epoch, logs=None):
        self._time = time.perf_counter()

    def _add_rates(self, logs):
        tokens = float(logs.get("tokens", 0.0))  # reset with the metrics each epoch
        elapsed = time.perf_counter() - self._time
        if elapsed > 0:
            logs["tokens_per_sec"] = tokens / elapsed
        logs["learning_rate"] = float(self.model.optimizer._get_current_learning_rate())

    def on_train_batch_end(self, batch, logs=None):
        logs = logs if logs is not None else {}
        loss = logs.get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            self.diverged_at = self._updates()
            self.model.stop_training = True
            return
        self._add_rates(logs)
        if self._updates() >= self.train_steps:
            self.model.stop_training = True
        elif self.max_seconds and time.perf_counter() - self._start > self.max_seconds:
            self.out_of_time = True
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            self._add_rates(logs)
        if self.diverged_at is None:
            self.step.assign(self._updates())
            self.manager.save(checkpoint_number=self._updates())


@dataclasses.dataclass
class TrainResult:
    """What `train` did."""

    initial_step: int
    final_step: int
    history: dict
    checkpoint: str
    seconds: float
    out_of_time: bool = False


def train(
    model,
    train_data,
    model_dir,
    train_steps,
    steps_per_checkpoint=1000,
    keep_checkpoints=5,
    validation_data=None,
    validation_steps=None,
    optimizer=None,
    warmup_steps=4000,
    learning_rate_scale=1.0,
    accumulation_steps=1,
    label_smoothing=0.1,
    tensorboard=True,
    callbacks=(),
    verbose="auto",
    max_seconds=None,
    jit_compile="auto",
):
    """Trains `model` with the paper's recipe for `train_steps` updates,
    resuming from `model_dir` if a previous run left checkpoints there.

    Create the model inside `strategy.scope()` to train under a
    `tf.distribute` strategy; `train` compiles it in the same scope.

    Args:
        model: a `Transformer` (or any model taking `(source, target_in)`).
        train_data: a `tf.data.Dataset` of `((source, target_in),
            target_out)` (see `make_batches`), or a function
            `input_context -> dataset`, which under a multi-replica
            strategy goes through `distribute_datasets_from_function` so
            each replica builds its own share of the token budget. It is
            repeated as needed.
        model_dir: where checkpoints and logs go.
        train_steps: total optimizer updates (across restarts).
        steps_per_checkpoint: updates between checkpoints (and between
            validation runs).
        keep_checkpoints: how many recent checkpoints to keep.
        validation_data: optional dataset evaluated at each checkpoint.
        validation_steps: batches of `validation_data` per evaluation.
        optimizer: defaults to `paper_optimizer(model.d_model, ...)`.
        warmup_steps: schedule warm-up, 4000 in the paper.
        learning_rate_scale: schedule scale, 1 in the paper.
        accumulation_steps: micro-batches averaged into each update, to
            reach the paper's ~25,000 tokens per update on fewer devices.
        label_smoothing: ε_ls, 0.1 in the paper.
        tensorboard: write TensorBoard logs to `model_dir/logs`.
        callbacks: more Keras callbacks.
        verbose: `model.fit` verbosity (the progress bar shows loss,
            accuracy, perplexity, learning rate and tokens/s).
        max_seconds: a wall-time budget for this call: training stops (and
            checkpoints) at the first update past it. `TrainResult.out_of_time`
            tells whether it did.
        jit_compile: compile the train step with XLA; `"auto"` uses
            `recommended_jit_compile(model.dtype_policy)`.

    Returns:
        A `TrainResult`.

    Raises:
        TrainingDivergedError: the loss became NaN; the message names the
            last good checkpoint, which is kept.

    Example:

    >>> result = train(model, batches, "runs/base", train_steps=100_000)
    """
    _validation.check_positive_int("train_steps", train_steps)
    _validation.check_positive_int("steps_per_checkpoint", steps_per_checkpoint)
    _validation.check_positive_int("keep_checkpoints", keep_checkpoints)
    _validation.check_positive_int("accumulation_steps", accumulation_steps)
    strategy = model.distribute_strategy
    with strategy.scope():
        if optimizer is None:
            optimizer = paper_optimizer(
                model.d_model, warmup_steps, learning_rate_scale, accumulation_steps
            )
        model.compile(
            optimizer=optimizer,
            loss=LabelSmoothedCrossEntropy(label_smoothing, pad_id=getattr(model, "pad_id", 0)),
            metrics=[MaskedAccuracy(), Perplexity(), TokenCount()],
            jit_compile=(
                recommended_jit_compile(model.dtype_policy)
                if jit_compile == "auto"
                else jit_compile
            ),
        )
        # The optimizer's slots must exist before a checkpoint is restored.
        model.optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        checkpoint = _checkpoint(model, model.optimizer, step)
    manager = tf.train.CheckpointManager(
        checkpoint, _checkpoint_dir(model_dir, strategy), max_to_keep=keep_checkpoints
    )
    # Every worker resumes from the chief's checkpoints.
    latest = tf.train.latest_checkpoint(os.path.join(model_dir, "checkpoints"))
    if latest:
        checkpoint.restore(latest).assert_existing_objects_matched()
    initial_step = _read_int(step)
    start = time.perf_counter()
    if initial_step >= train_steps:
        return TrainResult(initial_step, initial_step, {}, latest, 0.0)

    if callable(train_data) and not isinstance(train_data, tf.data.Dataset):
        if strategy.num_replicas_in_sync > 1:
            dataset = strategy.distribute_datasets_from_function(
                lambda context: train_data(context).repeat()
            )
        else:
            dataset = train_data(tf.distribute.InputContext()).repeat()
    else:
        dataset = train_data.repeat()

    state = _RunState(manager, step, train_steps, max_seconds)
    all_callbacks = [state, *callbacks]
    if tensorboard:
        all_callbacks.append(keras.callbacks.TensorBoard(os.path.join(model_dir, "logs")))
    micro_steps = steps_per_checkpoint * accumulation_steps
    with _multi_worker_fit(model, strategy):
        history = model.fit(
            dataset,
            epochs=math.ceil(train_steps / steps_per_checkpoint),
            initial_epoch=initial_step // steps_per_checkpoint,
            steps_per_epoch=micro_steps,
            validation_data=validation_data,
            validation_steps=validation_steps,
            callbacks=all_callbacks,
            shuffle=False,  # the input pipeline shuffles
            verbose=verbose,
        )
    final_step = _read_int(model.optimizer.iterations)
    if state.diverged_at is not None:
        raise TrainingDivergedError(
            f"The loss became NaN or infinite at step {state.diverged_at}. "
            f"Training stopped; the last good checkpoint is {manager.latest_checkpoint} "
            "(rerun to resume from it, e.g. with a lower learning_rate_scale)."
        )
    if _read_int(step) != final_step:  # stopped inside an interval
        step.assign(final_step)
        manager.save(checkpoint_number=final_step)
    return TrainResult(
        initial_step,
        final_step,
        history.history,
        manager.latest_checkpoint,
        time.perf_counter() - start,
        state.out_of_time,
    )

"""Checkpoints of a training run: writing, finding, restoring, averaging.

A run keeps its checkpoints in `model_dir/checkpoints/ckpt-<step>.*`. Each
holds the model's weights, the optimizer's variables and the update count.
Beside them, `run.json` records what the checkpoints fit: the model's
architecture, the tokenizer's fingerprint when known and the gradient
accumulation, so that a resume or an average with anything else is refused
instead of silently mixing weights (a checkpoint is restored by position);
and, for the record, the shapes of the training batches.
"""

import glob
import inspect
import json
import os
import re
import warnings

import keras
import numpy as np
import tensorflow as tf

from keras_transformer import _backend
from keras_transformer.training._distribute import is_chief
from keras_transformer.training._distribute import worker_id
from keras_transformer.training._keras_internals import moving_averages
from keras_transformer.training.restoring import restore_checkpoint
from keras_transformer.training.settings import STRUCTURAL

CHECKPOINT_DIR = "checkpoints"
RUN_FILE = "run.json"
# Config keys that do not change which weights a model has.
_NOT_ARCHITECTURE = ("name", "trainable", "dtype", "dropout", "attention_dropout")
_NOT_ARCHITECTURE += ("relu_dropout", "seed")


class IncompatibleRunError(ValueError):
    """Checkpoints do not fit the model or the training setup they are
    restored into; the message lists what differs."""


def averaged_weights(model):
    """`model.weights`, with the optimizer's moving average in place of
    each trainable weight when it keeps them (`use_ema=True`): the weights
    that evaluation scores and an export should use (`averaged_weights_in`
    puts them into the model for a block)."""
    averages = moving_averages(getattr(model, "optimizer", None))
    if not averages:
        return list(model.weights)
    by_variable = {id(v): a for v, a in zip(model.trainable_variables, averages, strict=True)}
    return [by_variable.get(id(w), w) for w in model.weights]


def training_checkpoint(model, optimizer=None, step=None):
    """A `tf.train.Checkpoint` of the model's weights as an ordered list,
    and of the optimizer's variables and the `step` variable when given.
    With an optimizer that keeps moving averages (`use_ema=True`) it also
    lists `averaged_weights`, `model.weights` with the averages in place of
    the trainable ones, which `average_checkpoints` reads.

    Keras 3 layers kept in Python lists (the encoder's and decoder's layer
    stacks) are not reachable through TensorFlow's object graph, so the
    weights are listed explicitly, in `model.weights` order, the same for
    any model built with the same configuration.
    """
    objects = {"model_weights": list(model.weights)}
    if optimizer is not None:
        objects["optimizer_weights"] = list(optimizer.variables)
        if moving_averages(optimizer):
            objects["averaged_weights"] = averaged_weights(model)
    if step is not None:
        objects["step"] = step
    return tf.train.Checkpoint(**objects)


def write_weights(model, prefix):
    """Writes `averaged_weights(model)` as a checkpoint at `prefix` (read
    it with `average_checkpoints`); returns the path written."""
    checkpoint = tf.train.Checkpoint(model_weights=averaged_weights(model))
    checkpoint.save_counter  # noqa: B018 (created on access; written like `save`'s)
    return checkpoint.write(prefix)


def write_weights_on_chief(model, model_dir, directory, name):
    """`write_weights` of `model` as `model_dir/<directory>/<name>` by the
    chief of its strategy; every other worker takes part in the writing
    (as every worker must) into a scratch directory that it removes.
    Returns whether this worker kept what it wrote."""
    strategy = model.distribute_strategy
    if is_chief(strategy):
        write_weights(model, os.path.join(model_dir, directory, name))
        return True
    scratch = os.path.join(model_dir, f"worker-{worker_id(strategy)[1]}-{directory}")
    write_weights(model, os.path.join(scratch, name))
    tf.io.gfile.rmtree(scratch)
    return False


def remove_checkpoint(prefix):
    """Deletes the files of the checkpoint at `prefix` (`prefix.index`,
    `prefix.data-*`)."""
    for path in glob.glob(prefix + ".*"):
        tf.io.gfile.remove(path)


def checkpoint_manager(checkpoint, model_dir, strategy, max_to_keep):
    """A `tf.train.CheckpointManager` that writes into `model_dir`.

    Under a multi-worker strategy every worker must take part in saving,
    but only the chief's copy is kept in `model_dir/checkpoints`; the other
    workers write to a directory of their own.
    """
    if is_chief(strategy):
        directory = os.path.join(model_dir, CHECKPOINT_DIR)
    else:
        directory = os.path.join(model_dir, f"worker-{worker_id(strategy)[1]}-checkpoints")
    return tf.train.CheckpointManager(checkpoint, directory, max_to_keep=max_to_keep)


def checkpoint_step(path):
    """The update count in a checkpoint prefix `.../ckpt-<step>`, or `None`
    for a path not named so.

    Example:

    >>> checkpoint_step("runs/base/checkpoints/ckpt-1200")
    1200
    """
    match = re.search(r"ckpt-(\d+)$", str(path))
    return int(match.group(1)) if match else None


def _steps_and_prefixes(directory):
    """`(step, prefix)` of every checkpoint in `directory`, newest first:
    those the state file lists and those whose index file is there (a
    partial copy of a run may lack either)."""
    prefixes = set()
    state = tf.train.get_checkpoint_state(directory)
    if state:
        prefixes.update(state.all_model_checkpoint_paths)
    prefixes.update(path[: -len(".index")] for path in glob.glob(f"{directory}/ckpt-*.index"))
    numbered = []
    for prefix in prefixes:
        step = checkpoint_step(prefix)
        if step is not None:
            path = prefix if os.path.isabs(prefix) else os.path.join(directory, prefix)
            numbered.append((step, path))
    return sorted(numbered, reverse=True)


def restore_latest(checkpoint, model_dir):
    """Restores the newest readable checkpoint of `model_dir` into
    `checkpoint` (every worker reads the chief's).

    A newer checkpoint that cannot be read (missing or truncated files) is
    skipped with a `RuntimeWarning` that names it.

    Returns:
        The path restored, or `None` when the run has no checkpoint yet.

    Raises:
        IncompatibleRunError: checkpoints exist but none can be read.
    """
    directory = os.path.join(model_dir, CHECKPOINT_DIR)
    skipped = []
    for _, path in _steps_and_prefixes(directory):
        try:
            restore_checkpoint(checkpoint, path)
        # What TensorFlow raises for missing, truncated or mismatched files.
        except (tf.errors.OpError, ValueError, AssertionError, IndexError, OSError) as error:
            skipped.append(f"{path} ({type(error).__name__}: {str(error).splitlines()[0]})")
            continue
        if skipped:
            warnings.warn(
                f"Resuming from {path}; skipped unreadable newer checkpoint(s): "
                + "; ".join(skipped),
                RuntimeWarning,
                stacklevel=2,
            )
        return path
    if skipped:
        raise IncompatibleRunError(
            f"No checkpoint in {directory} can be read, so the run cannot resume: "
            + "; ".join(skipped)
            + ". Restore the files, or train in a new model_dir."
        )
    return None


def architecture(model):
    """The part of `model.get_config()` that decides its weights."""
    config = model.get_config()
    return {key: value for key, value in config.items() if key not in _NOT_ARCHITECTURE}


def _differences(stored, model):
    """What differs between a run's recorded architecture `stored` and
    `model`'s. A setting the model gained after the run was recorded (a
    constructor argument missing from `stored`) counts as its default,
    which is what the model computed before it existed."""
    current = architecture(model)
    parameters = inspect.signature(type(model).__init__).parameters
    defaults = {
        key: parameters[key].default
        for key in current
        if key not in stored
        and key in parameters
        and parameters[key].default is not inspect.Parameter.empty
    }
    stored = {**defaults, **stored}
    keys = sorted(set(stored) | set(current))
    return [
        f"{key}: {stored.get(key)!r} stored, {current.get(key)!r} now"
        for key in keys
        if stored.get(key) != current.get(key)
    ]


def _read_run(directory):
    path = os.path.join(directory, RUN_FILE)
    if not tf.io.gfile.exists(path):
        # The best checkpoints (`model_dir/best`) are described by the run's.
        path = os.path.join(os.path.dirname(directory), CHECKPOINT_DIR, RUN_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def write_json_atomically(path, value, sort_keys=True):
    """Writes `value` as indented JSON (keys sorted unless `sort_keys` is
    false) to `path` through a temporary file and a rename: a crash or an
    error leaves the old file or the new one, never half of one, and no
    temporary file.

    Example:

    >>> write_json_atomically("runs/base/summary.json", {"test_bleu": 27.3})
    """
    text = json.dumps(value, indent=2, sort_keys=sort_keys) + "\n"  # fails before writing
    staging = f"{path}.tmp-{os.getpid()}"
    try:
        with tf.io.gfile.GFile(staging, "w") as f:
            f.write(text)
        tf.io.gfile.rename(staging, path, overwrite=True)
    except BaseException:
        if tf.io.gfile.exists(staging):
            tf.io.gfile.remove(staging)
        raise


def check_run(
    model_dir,
    model,
    settings,
    tokenizer_fingerprint=None,
    uses_ema=False,
    record=True,
    batch_shapes=None,
):
    """Refuses to train `model` on in `model_dir` when the run's recorded
    architecture, tokenizer, use of weight averages (`uses_ema`, which adds
    optimizer variables) or settings that shape its variables
    (`settings.STRUCTURAL`: accumulation, freezing, LoRA)
    differ; records them for a new run (when `record`: only the chief
    writes). The other settings (`TrainingSettings.to_dict`) are recorded
    too, anew when a resumed run changes them (more `train_steps`, say);
    so is `batch_shapes`, what the batches' shapes are
    (`BatchShapes` as JSON, or `None` for batches padded to their own
    longest).

    Args:
        model_dir: the run's directory.
        model: the `Transformer` to train.
        settings: the run's `TrainingSettings`.
        tokenizer_fingerprint: the tokenizer's `fingerprint`, or `None`.
        uses_ema: whether the optimizer keeps moving averages.
        record: write the record of a new run (the chief only).
        batch_shapes: the batches' `BatchShapes`, or `None`.

    Raises:
        IncompatibleRunError: listing every difference.
    """
    directory = os.path.join(model_dir, CHECKPOINT_DIR)
    values = settings.to_dict()
    current = {"model": architecture(model), "accumulation_steps": settings.accumulation_steps}
    current["moving_averages"] = bool(uses_ema)
    if tokenizer_fingerprint is not None:
        current["tokenizer_fingerprint"] = tokenizer_fingerprint
    # What the run may change, and records anew.
    changeable = {"batch_shapes": batch_shapes, "settings": values}
    stored = _read_run(directory)
    if stored is None:
        if record:
            tf.io.gfile.makedirs(directory)
            write_json_atomically(os.path.join(directory, RUN_FILE), current | changeable)
        return
    differences = _differences(stored.get("model", {}), model)
    stored.setdefault("moving_averages", False)  # runs recorded before EMA existed
    for key in ("accumulation_steps", "tokenizer_fingerprint", "moving_averages"):
        if key in stored and key in current and stored[key] != current[key]:
            differences.append(f"{key}: {stored[key]!r} stored, {current[key]!r} now")
    recorded = stored.get("settings", {})  # none before TrainingSettings
    differences += [
        f"{name}: {recorded[name]!r} stored, {values[name]!r} now"
        for name in STRUCTURAL
        if name != "accumulation_steps" and name in recorded and recorded[name] != values[name]
    ]
    if differences:
        raise IncompatibleRunError(
            f"{model_dir} holds a run that this one does not continue: "
            + "; ".join(differences)
            + ". Resume with the run's settings (accumulation_steps follows the number of "
            "devices; moving_averages is ema_momentum set or not), or train in a new model_dir."
        )
    if record and any(stored.get(key) != value for key, value in changeable.items()):
        write_json_atomically(os.path.join(directory, RUN_FILE), stored | changeable)


def all_finite(variables):
    """Whether every value of `variables` is finite (integer ones, of a
    quantized model, are by type)."""
    floats = (v for v in variables if keras.backend.is_float_dtype(str(v.dtype)))
    return all(bool(tf.reduce_all(tf.math.is_finite(v))) for v in floats)


def checkpoint_paths(model_dir):
    """Checkpoint prefixes in `model_dir/checkpoints`, oldest first.

    Example:

    >>> checkpoint_paths("runs/base")[-2:]
    ['runs/base/checkpoints/ckpt-99000', 'runs/base/checkpoints/ckpt-100000']
    """
    state = tf.train.get_checkpoint_state(os.path.join(model_dir, CHECKPOINT_DIR))
    return list(state.all_model_checkpoint_paths) if state else []


@_backend.tensorflow_only("training.average_checkpoints", "tf.train checkpoints")
def average_checkpoints(model, paths):
    """Sets `model`'s weights to the mean of the checkpoints at `paths`.

    The paper averages the last 5 (base) or 20 (big) checkpoints, written
    at 10-minute intervals (`checkpoint_paths(model_dir)[-5:]`); the best
    few by a validation score are `best_checkpoint_paths(model_dir)[:5]`
    (`train(keep_best=...)`). Only model weights are read: of a run whose
    optimizer kept moving averages (`use_ema=True`), the averages.

    Returns:
        The model.

    Raises:
        IncompatibleRunError: a checkpoint's run recorded another
            architecture than `model`'s.
        ValueError: no paths, or a checkpoint holds NaN or infinite weights.

    Example:

    >>> average_checkpoints(model, checkpoint_paths("runs/base")[-5:])
    >>> average_checkpoints(model, best_checkpoint_paths("runs/base")[:1])  # the best
    """
    if not paths:
        raise ValueError("`paths` must name at least one checkpoint. Received: paths=[]")
    for directory in sorted({os.path.dirname(os.fspath(path)) for path in paths}):
        stored = _read_run(directory)
        if stored is not None:
            differences = _differences(stored.get("model", {}), model)
            if differences:
                raise IncompatibleRunError(
                    f"The checkpoints in {directory} are of another model: "
                    + "; ".join(differences)
                )
    total = None
    for path in paths:
        key = "model_weights"
        if any(name.startswith("averaged_weights/") for name, _ in tf.train.list_variables(path)):
            key = "averaged_weights"
        checkpoint = tf.train.Checkpoint(**{key: list(model.weights)})
        restore_checkpoint(checkpoint, path, partial=True)
        weights = [np.asarray(w, dtype=np.float64) for w in model.get_weights()]
        if not all(np.isfinite(w).all() for w in weights):
            raise ValueError(f"The checkpoint {path} holds NaN or infinite weights.")
        total = weights if total is None else [t + w for t, w in zip(total, weights, strict=True)]
    model.set_weights([t / len(paths) for t in total])
    return model

"""Checkpoints of a training run: writing, finding, restoring, averaging.

A run keeps its checkpoints in `model_dir/checkpoints/ckpt-<step>.*`. Each
holds the model's weights, the optimizer's variables and the update count.
"""

import os

import numpy as np
import tensorflow as tf

from keras_transformer.training._distribute import is_chief
from keras_transformer.training._distribute import worker_id

CHECKPOINT_DIR = "checkpoints"


def training_checkpoint(model, optimizer=None, step=None):
    """A `tf.train.Checkpoint` of the model's weights as an ordered list,
    and of the optimizer's variables and the `step` variable when given.

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


def restore_latest(checkpoint, model_dir):
    """Restores the newest checkpoint of `model_dir` into `checkpoint`
    (every worker reads the chief's). Returns its path, or `None` when the
    run has none yet."""
    latest = tf.train.latest_checkpoint(os.path.join(model_dir, CHECKPOINT_DIR))
    if latest:
        checkpoint.restore(latest).assert_existing_objects_matched()
    return latest


def checkpoint_paths(model_dir):
    """Checkpoint prefixes in `model_dir/checkpoints`, oldest first.

    Example:

    >>> checkpoint_paths("runs/base")[-2:]
    ['runs/base/checkpoints/ckpt-99000', 'runs/base/checkpoints/ckpt-100000']
    """
    state = tf.train.get_checkpoint_state(os.path.join(model_dir, CHECKPOINT_DIR))
    return list(state.all_model_checkpoint_paths) if state else []


def average_checkpoints(model, paths):
    """Sets `model`'s weights to the mean of the checkpoints at `paths`.

    The paper averages the last 5 (base) or 20 (big) checkpoints, written
    at 10-minute intervals. Only model weights are read.

    Returns:
        The model.

    Example:

    >>> average_checkpoints(model, checkpoint_paths("runs/base")[-5:])
    """
    if not paths:
        raise ValueError("`paths` must name at least one checkpoint. Received: paths=[]")
    checkpoint = training_checkpoint(model)
    total = None
    for path in paths:
        checkpoint.restore(path).expect_partial().assert_existing_objects_matched()
        weights = [np.asarray(w, dtype=np.float64) for w in model.get_weights()]
        total = weights if total is None else [t + w for t, w in zip(total, weights, strict=True)]
    model.set_weights([t / len(paths) for t in total])
    return model

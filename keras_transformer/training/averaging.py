"""Checkpoint averaging under a `TimeBudget`: the weights of the last
part of the updates the budget allows, kept apart from the regular
checkpoints' rotation, and the paths to average (`average_checkpoints`
averages them)."""

import glob
import os

from keras_transformer.training.budget import read_budget
from keras_transformer.training.checkpoints import checkpoint_paths
from keras_transformer.training.checkpoints import checkpoint_step
from keras_transformer.training.checkpoints import remove_checkpoint
from keras_transformer.training.checkpoints import write_weights_on_chief
from keras_transformer_runtime import validation

# The averaging checkpoints' own directory in `model_dir`, out of the
# regular checkpoints' rotation.
AVERAGING_DIR = "averaging"


def _averaging_checkpoints(model_dir):
    """`{step: prefix}` of the checkpoints in `model_dir/averaging`."""
    directory = os.path.join(model_dir, AVERAGING_DIR)
    prefixes = (p[: -len(".index")] for p in glob.glob(os.path.join(directory, "ckpt-*.index")))
    return {checkpoint_step(p): p for p in prefixes}


def keep_for_averaging(model, model_dir, step, window_start, count):
    """Writes the weights of update `step` (the evaluated ones:
    `write_weights`) as `model_dir/averaging/ckpt-<step>`, then deletes
    the averaging checkpoints before `window_start` and all but the newest
    `count`: their own rotation, apart from the regular checkpoints'
    `keep_checkpoints`. Under a multi-worker strategy only the chief keeps
    them (the others take part in writing, into a scratch directory)."""
    if not write_weights_on_chief(model, model_dir, AVERAGING_DIR, f"ckpt-{step}"):
        return
    written = _averaging_checkpoints(model_dir)
    kept = sorted(s for s in written if s >= window_start)[-count:]
    for old, prefix in written.items():
        if old not in kept:
            remove_checkpoint(prefix)


def averaging_checkpoint_paths(model_dir, count):
    """The newest `count` checkpoints to average of the run in
    `model_dir`. Under a `TimeBudget`: the budget's averaging checkpoints
    (`model_dir/averaging`, spread over the averaging window, kept apart
    from the regular checkpoints' rotation) and the run's last checkpoint,
    those in the window it recorded (never in the warm-up); at least the
    newest checkpoint. Without a recorded budget, the newest `count`
    regular checkpoints (the paper's average of the last checkpoints).

    Example:

    >>> average_checkpoints(model, averaging_checkpoint_paths("runs/small", 5))
    """
    validation.check_positive_int(count=count)
    paths = checkpoint_paths(model_dir)
    budget = read_budget(model_dir)
    if budget is None:
        return paths[-count:]
    candidates = _averaging_checkpoints(model_dir)
    if paths:  # the last update, checkpointed by the regular rotation
        candidates[checkpoint_step(paths[-1])] = paths[-1]
    inside = [candidates[s] for s in sorted(candidates) if s >= budget["averaging_from"]]
    return (inside or paths[-1:])[-count:]

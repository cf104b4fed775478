"""Restoring a training checkpoint into a model, one written before
keras_transformer 0.2 included.

Until 0.2 the attention's projections were `Dense` layers whose kernels
lay `(d_model, heads * depth)`; since, they are Keras's own `EinsumDense`,
`(d_model, heads, depth)`. The values are the same, in the same order: a
checkpoint of that time is restored by position with each such tensor
reshaped (`layers._projection.merges_axes` says which are).
"""

import tensorflow as tf

from keras_transformer.layers._projection import in_shape
from keras_transformer.layers._projection import merges_axes

# What `checkpoints.training_checkpoint` and `average_checkpoints` write:
# ordered lists of variables, and the update count.
_LISTS = ("model_weights", "optimizer_weights", "averaged_weights")
_SCALARS = ("step",)


def restore_checkpoint(checkpoint, path, partial=False):
    """`checkpoint.restore(path)`, every object of `checkpoint` matched by
    a value of the file (`partial`: the file may hold others too).

    Raises:
        ValueError: a value of the file does not fit its variable, or one
            is missing (TensorFlow's own errors where the file is of today's
            layout: `tf.errors.OpError`, `AssertionError`).

    Example:

    >>> restore_checkpoint(training_checkpoint(model), "runs/base/checkpoints/ckpt-100")
    """
    variables = _variables_by_key(checkpoint)
    stored = dict(tf.train.list_variables(path))
    if not any(key in stored and merges_axes(stored[key], v.shape) for key, v in variables):
        status = checkpoint.restore(path)
        if partial:
            status = status.expect_partial()
        status.assert_existing_objects_matched()
        return
    missing = [key for key, _ in variables if key not in stored]
    if missing:
        raise ValueError(
            f"The checkpoint {path} has no value for {len(missing)} of the model's variables "
            f"(the first: {missing[0]}): it is of another model."
        )
    reader = tf.train.load_checkpoint(path)
    for key, variable in variables:
        variable.assign(in_shape(reader.get_tensor(key), tuple(variable.shape)))


def _variables_by_key(checkpoint):
    """`[(key, variable)]` of `checkpoint`'s objects, each key the name of
    its value in a checkpoint file."""
    pairs = []
    for name in _LISTS:
        for index, variable in enumerate(getattr(checkpoint, name, None) or ()):
            pairs.append((f"{name}/{index}/.ATTRIBUTES/VARIABLE_VALUE", variable))
    for name in _SCALARS:
        variable = getattr(checkpoint, name, None)
        if variable is not None:
            pairs.append((f"{name}/.ATTRIBUTES/VARIABLE_VALUE", variable))
    return pairs

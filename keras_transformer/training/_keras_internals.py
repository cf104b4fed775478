"""The one place in the package that touches private Keras internals.

Keras 3.15's `fit` fails under `MultiWorkerMirroredStrategy`
(tensorflow/tensorflow#72388); `multi_worker_fit` works around it, and
needs a private attribute of `keras.Model` to do so. No other module may
use a private Keras attribute (`tests/test_package.py` checks); when the
upstream bug is fixed, this module goes. `moving_averages` reads the
weight averages of an optimizer with `use_ema=True`, which Keras 3.15 keeps
private.
"""

import contextlib

import tensorflow as tf


def _with_leading_axis(step_function):
    def step(data):
        return tf.nest.map_structure(
            lambda v: tf.reshape(v, [1]) if v.shape.rank == 0 else v, step_function(data)
        )

    return step


@contextlib.contextmanager
def multi_worker_fit(model, strategy):
    """Works around two Keras 3 bugs with `MultiWorkerMirroredStrategy`
    (tensorflow/tensorflow#72388) during a `fit`; a no-op under any other
    strategy.

    1. When a model was created under a strategy, `fit` first peeks at one
       batch and averages it over the replicas (`strategy.reduce("MEAN")`)
       to build the model symbolically; across workers that fails on nested
       inputs such as `((source, target_in), target_out)`. Our models are
       built in their constructor and need no peek, so the model forgets its
       strategy (`model._distribute_strategy`) during `fit`, which then finds
       it in the strategy's scope.
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


def moving_averages(optimizer):
    """The exponential moving averages of the trainable weights that a
    Keras optimizer built with `use_ema=True` keeps (in the order of the
    variables it was built with), or `[]` without EMA or without an
    optimizer (`None`). Keras exposes them
    only through `finalize_variable_values`, which overwrites the weights
    for good at the end of `fit`; evaluation and checkpoints need to read
    them without losing the weights being trained."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)  # LossScaleOptimizer
    if not getattr(inner, "use_ema", False) or not getattr(inner, "built", False):
        return []
    return list(inner._model_variables_moving_average)

"""The paper's learning-rate schedule and optimizer (§5.3)."""

import keras
from keras import ops

from keras_transformer_runtime import _validation


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lrate = scale · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5).

    The rate grows linearly for `warmup_steps` updates, peaks at
    `step = warmup_steps` (at `scale · (d_model · warmup_steps)^-0.5`), then
    decays with the inverse square root of the step.

    Steps count optimizer *updates*: with gradient accumulation over
    `accumulation_steps` micro-batches (Keras passes the micro-batch count
    to schedules), the step is `iterations // accumulation_steps`. Keras
    counts from 0; step 0 is read as step 1, so the first update does not
    get a zero rate.

    Args:
        d_model: the model width (512 base, 1024 big).
        warmup_steps: updates of linear warm-up, 4000 in the paper.
        scale: a constant factor, 1 in the paper.
        accumulation_steps: micro-batches per update.

    Example:

    >>> schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    >>> float(schedule(4000))  # the peak, (512 * 4000) ** -0.5
    0.000698771...
    """

    def __init__(self, d_model=512, warmup_steps=4000, scale=1.0, accumulation_steps=1):
        _validation.check_positive_int(
            d_model=d_model, warmup_steps=warmup_steps, accumulation_steps=accumulation_steps
        )
        if not scale > 0:
            raise ValueError(f"`scale` must be positive. Received: scale={scale!r}")
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = float(scale)
        self.accumulation_steps = accumulation_steps

    def __call__(self, step):
        step = ops.floor_divide(ops.cast(step, "int32"), self.accumulation_steps)
        step = ops.cast(ops.maximum(step, 1), "float32")
        return (
            self.scale
            * self.d_model**-0.5
            * ops.minimum(ops.rsqrt(step), step * self.warmup_steps**-1.5)
        )

    def get_config(self):
        # `LearningRateSchedule.get_config` raises NotImplementedError: there
        # is no base configuration to extend.
        return {
            "d_model": self.d_model,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
            "accumulation_steps": self.accumulation_steps,
        }


def paper_optimizer(
    d_model=512, warmup_steps=4000, scale=1.0, accumulation_steps=1, ema_momentum=None
):
    """Adam(β1 0.9, β2 0.98, ε 1e-9) on `TransformerSchedule` (§5.3).

    With `accumulation_steps > 1` the optimizer averages the gradients of
    that many micro-batches before each update (Keras's
    `gradient_accumulation_steps`), and the schedule counts updates.

    With `ema_momentum` (not in the paper; e.g. 0.999) it also keeps an
    exponential moving average of the weights (Keras's `use_ema`),
    updated after each update: `average = m * average + (1 - m) * weight`.
    `train` then evaluates, keeps as best and leaves in the model the
    averages, and `average_checkpoints` reads them.

    Example:

    >>> optimizer = paper_optimizer(d_model=512, accumulation_steps=4)
    """
    schedule = TransformerSchedule(d_model, warmup_steps, scale, accumulation_steps)
    return adam_optimizer(schedule, accumulation_steps, ema_momentum)


def adam_optimizer(learning_rate, accumulation_steps=1, ema_momentum=None):
    """The paper's Adam (β1 0.9, β2 0.98, ε 1e-9) on any learning rate or
    schedule, with `paper_optimizer`'s accumulation and moving averages.

    Example:

    >>> optimizer = adam_optimizer(BudgetSchedule(1e-3, total_steps=2000))
    """
    _validation.check_positive_int(accumulation_steps=accumulation_steps)
    if ema_momentum is not None:
        _validation.check_rate(ema_momentum=ema_momentum)
    return keras.optimizers.Adam(
        learning_rate=learning_rate,
        beta_1=0.9,
        beta_2=0.98,
        epsilon=1e-9,
        gradient_accumulation_steps=accumulation_steps if accumulation_steps > 1 else None,
        use_ema=ema_momentum is not None,
        ema_momentum=0.99 if ema_momentum is None else ema_momentum,
    )

"""The paper's learning-rate schedule and optimizer (§5.3), and the
budget schedule (`BudgetSchedule`) that `train` fits to a time budget."""

import math
import warnings

import keras
from keras import ops

from keras_transformer_runtime import validation


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
        validation.check_positive_int(
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


DECAYS = ("linear", "cosine")


@keras.saving.register_keras_serializable(package="keras_transformer")
class BudgetSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to `peak_learning_rate`, then decay to zero at
    `total_steps`, which may change while training runs.

        warmup = min(max_warmup_steps, warmup_fraction * total_steps)
        lrate  = peak * step / warmup                          step < warmup
        lrate  = peak * (total - step) / (total - warmup)      linear decay
        lrate  = peak * (1 + cos(pi * (step - warmup) / (total - warmup))) / 2
                                                               cosine decay

    and 0 from `total_steps` on. `total_steps` is a variable: `TimeBudget`
    sets it to the updates a wall-time budget allows (`set_total_steps`);
    for a fixed number of updates, leave it. Steps count optimizer updates
    (`iterations // accumulation_steps`), from 1, as `TransformerSchedule`.

    Args:
        peak_learning_rate: the rate at the end of the warm-up, e.g. the
            paper's peak `(d_model * 4000) ** -0.5`.
        total_steps: the updates of the run (a first estimate under a
            time budget).
        warmup_fraction: the part of `total_steps` spent warming up.
        max_warmup_steps: a cap on the warm-up (the paper's 4,000).
        decay: `"linear"` or `"cosine"`.
        accumulation_steps: micro-batches per update.

    Example:

    >>> schedule = BudgetSchedule(1e-3, total_steps=1000, warmup_fraction=0.1)
    >>> float(schedule(100)), float(schedule(550)), float(schedule(1000))
    (0.001, 0.0005, 0.0)
    """

    def __init__(
        self,
        peak_learning_rate,
        total_steps,
        warmup_fraction=0.1,
        max_warmup_steps=4000,
        decay="linear",
        accumulation_steps=1,
    ):
        validation.check_positive_int(
            total_steps=total_steps,
            max_warmup_steps=max_warmup_steps,
            accumulation_steps=accumulation_steps,
        )
        validation.check_choice(DECAYS, decay=decay)
        if not peak_learning_rate > 0:
            raise ValueError(
                f"`peak_learning_rate` must be positive. Received: "
                f"peak_learning_rate={peak_learning_rate!r}"
            )
        if not 0 <= warmup_fraction < 1:
            raise ValueError(
                "`warmup_fraction` must be in [0, 1). Received: "
                f"warmup_fraction={warmup_fraction!r}"
            )
        self.peak_learning_rate = float(peak_learning_rate)
        self.warmup_fraction = float(warmup_fraction)
        self.max_warmup_steps = max_warmup_steps
        self.decay = decay
        self.accumulation_steps = accumulation_steps
        self.total_steps = keras.Variable(
            float(total_steps),
            trainable=False,
            dtype="float32",
            name="budget_total_steps",
            aggregation="only_first_replica",
        )

    def set_total_steps(self, total_steps):
        """Moves the end of the decay to `total_steps` updates."""
        self.total_steps.assign(float(max(1, total_steps)))

    def warmup_updates(self, total_steps=None):
        """The warm-up's length in updates for `total_steps` (default: the
        current estimate): the `warmup` of the formula above, which the
        `max_warmup_steps` setting only caps.

        >>> BudgetSchedule(1e-3, total_steps=1000).warmup_updates()
        100
        """
        if total_steps is None:
            total_steps = float(ops.convert_to_numpy(self.total_steps))
        return max(1, min(self.max_warmup_steps, round(self.warmup_fraction * total_steps)))

    def warmup_steps(self, total_steps=None):
        """Deprecated: `warmup_updates`, a name apart from the setting
        that caps it."""
        warnings.warn(
            "BudgetSchedule.warmup_steps() is deprecated: use warmup_updates()",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.warmup_updates(total_steps)

    def __call__(self, step):
        step = ops.floor_divide(ops.cast(step, "int32"), self.accumulation_steps)
        step = ops.cast(ops.maximum(step, 1), "float32")
        total = ops.convert_to_tensor(self.total_steps)
        warmup = ops.clip(ops.round(self.warmup_fraction * total), 1.0, self.max_warmup_steps)
        progress = ops.clip((step - warmup) / ops.maximum(total - warmup, 1.0), 0.0, 1.0)
        if self.decay == "linear":
            decayed = 1.0 - progress
        else:
            decayed = 0.5 * (1.0 + ops.cos(math.pi * progress))
        ramp = ops.minimum(step / warmup, 1.0)
        return self.peak_learning_rate * ops.where(step < warmup, ramp, decayed)

    def get_config(self):
        # `LearningRateSchedule.get_config` raises NotImplementedError: there
        # is no base configuration to extend.
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "total_steps": max(1, round(float(ops.convert_to_numpy(self.total_steps)))),
            "warmup_fraction": self.warmup_fraction,
            "max_warmup_steps": self.max_warmup_steps,
            "decay": self.decay,
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
    validation.check_positive_int(accumulation_steps=accumulation_steps)
    if ema_momentum is not None:
        validation.check_rate(ema_momentum=ema_momentum)
    return keras.optimizers.Adam(
        learning_rate=learning_rate,
        beta_1=0.9,
        beta_2=0.98,
        epsilon=1e-9,
        gradient_accumulation_steps=accumulation_steps if accumulation_steps > 1 else None,
        use_ema=ema_momentum is not None,
        ema_momentum=0.99 if ema_momentum is None else ema_momentum,
    )

"""Training within a time budget: a schedule over the updates the budget
allows, re-estimated while training runs.

A fixed step-based schedule assumes a machine's speed: the same wall-time
budget allows a different number of updates on another CPU, and a fixed
warm-up is then a different part of the run. Here the schedule is defined
over the *budget*: `ScheduleFitter` measures the time an update takes
(evaluations and checkpoints included), estimates the updates the
remaining time allows, and sets `BudgetSchedule.total_steps`; the schedule
warms up for a fraction of them and decays linearly to zero at the
estimated end (Li et al., "Budget-Aware Training", ICLR 2020: schedules
that reach zero at the budget's end beat step-based ones at every budget).
The checkpoints to average are taken from the last part of the budget,
never from the warm-up (`averaging_checkpoint_paths`).

`train(..., budget=TimeBudget(seconds))` uses both unless told otherwise
(`learning_rate_schedule`): `ScheduleFitter` fits the schedule to the
budget's clock. `model_dir/budget.json` records the estimate, so that a
resumed run starts from it.
"""

import glob
import json
import math
import os
import time

import keras

from keras_transformer.training._distribute import broadcast_from_chief
from keras_transformer.training._distribute import is_chief
from keras_transformer.training._distribute import read_int
from keras_transformer.training.checkpoints import checkpoint_paths
from keras_transformer.training.checkpoints import checkpoint_step
from keras_transformer.training.checkpoints import remove_checkpoint
from keras_transformer.training.checkpoints import write_json_atomically
from keras_transformer.training.checkpoints import write_weights_on_chief
from keras_transformer.training.schedules import DECAYS
from keras_transformer.training.schedules import BudgetSchedule
from keras_transformer.training.schedules import adam_optimizer
from keras_transformer_runtime import validation

BUDGET_FILE = "budget.json"
# The averaging checkpoints' own directory in `model_dir`, out of the
# regular checkpoints' rotation.
AVERAGING_DIR = "averaging"


def read_budget(model_dir):
    """`model_dir/budget.json`, what the last `TimeBudget` estimated (keys
    `seconds_per_step`, `total_steps`, `warmup_steps`, `averaging_from`),
    or `None` when the run has none."""
    path = os.path.join(model_dir, BUDGET_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


class TimeBudget:
    """A wall-time budget for training, with one clock that `train`'s
    callbacks all read.

    Training may run until `left()` reaches zero: `seconds` after `started`,
    less `reserve_seconds` for what follows training (evaluation, an
    export). The reserve may change while training runs: a caller that
    learns what the later stages cost (from evaluation times, say) sets it
    again. With the budget schedule (`train`'s default under a budget), the
    learning rate warms up for `warmup_fraction` of the updates the budget
    allows, decays (`decay`) to zero at their end, and `averaging_checkpoints`
    checkpoints are spread over the last `averaging_fraction` of them.

    Args:
        seconds: the budget, a positive number of seconds; `math.inf` for
            none (the budget schedule then ends at `train`'s `train_steps`).
        started: when it began, as `time.time()` gives it (default: now),
            e.g. when the process started, so that imports count.
        reserve_seconds: the time to leave at the end, `>= 0`.
        warmup_fraction: the budget schedule's warm-up, a part of the
            updates, in [0, 1).
        decay: `"linear"` or `"cosine"`.
        averaging_checkpoints: checkpoints wanted for averaging.
        averaging_fraction: the last part of the updates they come from,
            in (0, 1].

    Example:

    >>> budget = TimeBudget(30 * 60, reserve_seconds=120)
    >>> result = train(model, batches, "runs/m30k", 100_000, budget=budget)
    >>> result.out_of_time
    True
    """

    def __init__(
        self,
        seconds,
        started=None,
        reserve_seconds=0.0,
        warmup_fraction=0.1,
        decay="linear",
        averaging_checkpoints=5,
        averaging_fraction=0.2,
    ):
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
            raise ValueError(f"`seconds` must be a positive number. Received: seconds={seconds!r}")
        validation.check_non_negative(reserve_seconds=reserve_seconds)
        if not 0 <= warmup_fraction < 1:
            raise ValueError(
                "`warmup_fraction` must be in [0, 1). Received: "
                f"warmup_fraction={warmup_fraction!r}"
            )
        validation.check_choice(DECAYS, decay=decay)
        validation.check_positive_int(averaging_checkpoints=averaging_checkpoints)
        if not 0 < averaging_fraction <= 1:
            raise ValueError(
                "`averaging_fraction` must be in (0, 1]. Received: "
                f"averaging_fraction={averaging_fraction!r}"
            )
        self.seconds = float(seconds)
        self.started = time.time() if started is None else float(started)
        self.reserve_seconds = float(reserve_seconds)
        self.warmup_fraction = warmup_fraction
        self.decay = decay
        self.averaging_checkpoints = averaging_checkpoints
        self.averaging_fraction = averaging_fraction

    def elapsed(self):
        """Seconds since `started`."""
        return time.time() - self.started

    def left(self):
        """Seconds left for training: the budget less the time spent and
        the reserve (negative once training should have stopped)."""
        return self.seconds - self.elapsed() - self.reserve_seconds


class ScheduleFitter(keras.callbacks.Callback):
    """Fits a `BudgetSchedule` to a `TimeBudget` while training runs
    (`train` adds it under a budget with the budget schedule).

    After `measure_after` updates (the first ones pay for tracing), and
    then every `every` updates, it measures the wall time per update since
    then (everything `fit` does between updates included: evaluations,
    checkpoints), estimates the updates left in `budget.left()`, and moves
    the schedule's end there (never beyond `max_steps`). The chief's
    estimate is used on every worker.

    It also asks for the checkpoints to average (`wants_checkpoint`, which
    `train` follows): the budget's `averaging_checkpoints`, evenly spaced
    over the last `averaging_fraction` of the estimated updates, and
    records the estimate in `model_dir/budget.json` (`read_budget`).

    Args:
        schedule: the optimizer's `BudgetSchedule`.
        budget: the `TimeBudget`.
        max_steps: a cap on the updates (`train`'s `train_steps`).
        model_dir: where `budget.json` goes (the chief writes it).
        seconds_per_step: a starting estimate (a resumed run's last one).
        measure_after, every: updates before the first estimate, and
            between estimates.
    """

    def __init__(
        self,
        schedule,
        budget,
        max_steps=None,
        model_dir=None,
        seconds_per_step=None,
        measure_after=5,
        every=10,
    ):
        super().__init__()
        if not isinstance(schedule, BudgetSchedule):
            raise ValueError(
                "`schedule` must be a keras_transformer.training.BudgetSchedule. "
                f"Received: schedule={schedule!r}"
            )
        if not isinstance(budget, TimeBudget):
            raise ValueError(
                "`budget` must be a keras_transformer.training.TimeBudget. "
                f"Received: budget={budget!r}"
            )
        validation.check_positive_int(measure_after=measure_after, every=every)
        validation.check_positive_int(allow_none=True, max_steps=max_steps)
        if math.isinf(budget.seconds) and max_steps is None:
            raise ValueError(
                "A budget without a time limit needs `max_steps`, where the schedule ends. "
                "Received: max_steps=None"
            )
        self.schedule = schedule
        self.budget = budget
        self.max_steps = max_steps
        self.model_dir = model_dir
        self.seconds_per_step = seconds_per_step
        self.measure_after = measure_after
        self.every = every
        self._reference = None
        self._batches = 0
        self._last_wanted = None

    def _step(self):
        return read_int(self.model.optimizer.iterations)  # updates, not micro-batches

    @property
    def total_steps(self):
        """The current estimate of the run's updates."""
        return max(1, round(float(self.schedule.total_steps.numpy())))

    def on_train_begin(self, logs=None):
        self._batches = 0
        self._reference = None
        if self.seconds_per_step:  # a resumed run: the last estimate until measured
            self._estimate(self._step())

    def on_train_batch_end(self, batch, logs=None):
        self._batches += 1
        if self._batches == self.measure_after:
            self._reference = (self.budget.elapsed(), self._step())
        elif self._reference and (self._batches - self.measure_after) % self.every == 0:
            start, first = self._reference
            step = self._step()
            if step > first:
                self.seconds_per_step = (self.budget.elapsed() - start) / (step - first)
            self._estimate(step)

    def _estimate(self, step):
        left = max(0.0, self.budget.left())
        if math.isinf(left):  # no time limit: the run's updates
            total = self.max_steps
        else:
            total = step + max(1, math.floor(left / self.seconds_per_step))
            if self.max_steps is not None:
                total = min(total, self.max_steps)
        strategy = self.model.distribute_strategy
        (total,) = broadcast_from_chief(strategy, [total])
        self.schedule.set_total_steps(round(total))
        if self.model_dir and is_chief(strategy):
            os.makedirs(self.model_dir, exist_ok=True)
            write_json_atomically(
                os.path.join(self.model_dir, BUDGET_FILE),
                {
                    "seconds_per_step": self.seconds_per_step,
                    "total_steps": self.total_steps,
                    "warmup_steps": self.schedule.warmup_steps(),
                    "averaging_from": self.averaging_from(),
                },
            )

    def averaging_from(self):
        """The first update of the averaging window: the last
        `averaging_fraction` of the estimated updates, after the warm-up."""
        total = self.total_steps
        start = total - math.floor(self.budget.averaging_fraction * total) + 1
        return max(start, self.schedule.warmup_steps(total) + 1)

    def wants_checkpoint(self, step):
        """Whether update `step` should be checkpointed for averaging: it
        lies in the averaging window, at least `1 / averaging_checkpoints`
        of the window after the last one wanted (the run's last update is
        checkpointed anyway)."""
        if self.seconds_per_step is None or step < self.averaging_from():
            return False
        window = max(1, self.total_steps - self.averaging_from() + 1)
        spacing = max(1, window // self.budget.averaging_checkpoints)
        if self._last_wanted is not None and step - self._last_wanted < spacing:
            return False
        self._last_wanted = step
        return True


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


def recipe_optimizer(model, optimizer, learning_rate_schedule, budget, train_steps, **recipe):
    """The optimizer `train` compiles with (`optimizer` when given), and
    the `BudgetSchedule` it follows when `train` makes one (else `None`):
    under `learning_rate_schedule` (`LEARNING_RATE_SCHEDULES`, see `train`)
    and a `TimeBudget` or `None`. `recipe`: `warmup_steps`,
    `learning_rate_scale`, `accumulation_steps`, `ema_momentum`."""
    budgeted = optimizer is None and (
        learning_rate_schedule == "budget"
        or (learning_rate_schedule == "auto" and budget is not None)
    )
    if not budgeted:
        return optimizer, None
    shape = budget or TimeBudget(1)  # the schedule's shape: the defaults without a budget
    schedule = BudgetSchedule(
        # The paper schedule's peak, reached after at most `warmup_steps`.
        recipe["learning_rate_scale"] * (model.d_model * recipe["warmup_steps"]) ** -0.5,
        train_steps,
        warmup_fraction=shape.warmup_fraction,
        max_warmup_steps=recipe["warmup_steps"],
        decay=shape.decay,
        accumulation_steps=recipe["accumulation_steps"],
    )
    optimizer = adam_optimizer(schedule, recipe["accumulation_steps"], recipe["ema_momentum"])
    return optimizer, schedule

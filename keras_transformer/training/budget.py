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
never from the warm-up (`training.averaging`). A `BudgetPlan` shapes
both; the `TimeBudget` is only the clock.

`train(..., budget=TimeBudget(seconds))` uses both unless told otherwise
(`learning_rate_schedule`): `ScheduleFitter` fits the schedule to the
budget's clock. `model_dir/budget.json` records the estimate, so that a
resumed run starts from it.
"""

import dataclasses
import json
import math
import os
import time

import keras

from keras_transformer.training._distribute import broadcast_from_chief
from keras_transformer.training._distribute import is_chief
from keras_transformer.training._distribute import read_int
from keras_transformer.training.checkpoints import write_json_atomically
from keras_transformer.training.schedules import DECAYS
from keras_transformer.training.schedules import BudgetSchedule
from keras_transformer.training.schedules import adam_optimizer
from keras_transformer_runtime import validation

BUDGET_FILE = "budget.json"


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
    """A wall-time budget for training: one clock that `train`'s callbacks
    all read.

    Training may run until `left()` reaches zero: `seconds` after `started`,
    less `reserve_seconds` for what follows training (evaluation, an
    export). The reserve may change while training runs: a caller that
    learns what the later stages cost (from evaluation times, say) sets it
    again. How a run spends its budget (the budget schedule's shape, the
    checkpoints to average) is its `BudgetPlan`.

    Args:
        seconds: the budget, a positive number of seconds; `math.inf` for
            none (the budget schedule then ends at `train`'s `train_steps`).
        started: when it began, as `time.time()` gives it (default: now),
            e.g. when the process started, so that imports count.
        reserve_seconds: the time to leave at the end, `>= 0`.

    Example:

    >>> budget = TimeBudget(30 * 60, reserve_seconds=120)
    >>> result = train(model, batches, "runs/m30k", 100_000, budget=budget)
    >>> result.out_of_time
    True
    """

    def __init__(self, seconds, started=None, reserve_seconds=0.0):
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
            raise ValueError(f"`seconds` must be a positive number. Received: seconds={seconds!r}")
        validation.check_non_negative(reserve_seconds=reserve_seconds)
        self.seconds = float(seconds)
        self.started = time.time() if started is None else float(started)
        self.reserve_seconds = float(reserve_seconds)

    def elapsed(self):
        """Seconds since `started`."""
        return time.time() - self.started

    def left(self):
        """Seconds left for training: the budget less the time spent and
        the reserve (negative once training should have stopped)."""
        return self.seconds - self.elapsed() - self.reserve_seconds


@dataclasses.dataclass(frozen=True)
class BudgetPlan:
    """How a run under a `TimeBudget` spends it: with the budget schedule
    (`train`'s default under a budget), the learning rate warms up for
    `warmup_fraction` of the updates the budget allows and decays
    (`decay`) to zero at their end, and `averaging_checkpoints`
    checkpoints are spread over the last `averaging_fraction` of them
    (`averaging_checkpoint_paths`).

    Attributes:
        warmup_fraction: the budget schedule's warm-up, a part of the
            updates, in [0, 1).
        decay: `"linear"` or `"cosine"`.
        averaging_checkpoints: checkpoints wanted for averaging.
        averaging_fraction: the last part of the updates they come from,
            in (0, 1].

    Example:

    >>> plan = BudgetPlan(warmup_fraction=0.05, averaging_checkpoints=8)
    >>> train(model, batches, "runs/m30k", 100_000, budget=TimeBudget(1800), budget_plan=plan)
    """

    warmup_fraction: float = 0.1
    decay: str = "linear"
    averaging_checkpoints: int = 5
    averaging_fraction: float = 0.2

    def __post_init__(self):
        if not 0 <= self.warmup_fraction < 1:
            raise ValueError(
                "`warmup_fraction` must be in [0, 1). Received: "
                f"warmup_fraction={self.warmup_fraction!r}"
            )
        validation.check_choice(DECAYS, decay=self.decay)
        validation.check_positive_int(averaging_checkpoints=self.averaging_checkpoints)
        if not 0 < self.averaging_fraction <= 1:
            raise ValueError(
                "`averaging_fraction` must be in (0, 1]. Received: "
                f"averaging_fraction={self.averaging_fraction!r}"
            )


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
    `train` follows): the plan's `averaging_checkpoints`, evenly spaced
    over the last `averaging_fraction` of the estimated updates, and
    records the estimate in `model_dir/budget.json` (`read_budget`).

    Args:
        schedule: the optimizer's `BudgetSchedule`.
        budget: the `TimeBudget`.
        plan: the `BudgetPlan` (default: the defaults).
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
        plan=None,
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
        self.plan = BudgetPlan() if plan is None else plan
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
        start = total - math.floor(self.plan.averaging_fraction * total) + 1
        return max(start, self.schedule.warmup_steps(total) + 1)

    def wants_checkpoint(self, step):
        """Whether update `step` should be checkpointed for averaging: it
        lies in the averaging window, at least `1 / averaging_checkpoints`
        of the window after the last one wanted (the run's last update is
        checkpointed anyway)."""
        if self.seconds_per_step is None or step < self.averaging_from():
            return False
        window = max(1, self.total_steps - self.averaging_from() + 1)
        spacing = max(1, window // self.plan.averaging_checkpoints)
        if self._last_wanted is not None and step - self._last_wanted < spacing:
            return False
        self._last_wanted = step
        return True


def recipe_optimizer(model, optimizer, learning_rate_schedule, budget, plan, train_steps, **recipe):
    """The optimizer `train` compiles with (`optimizer` when given), and
    the `BudgetSchedule` it follows when `train` makes one (else `None`):
    under `learning_rate_schedule` (`LEARNING_RATE_SCHEDULES`, see `train`),
    a `TimeBudget` or `None`, and the schedule's shape from the
    `BudgetPlan` `plan`. `recipe`: `warmup_steps`, `learning_rate_scale`,
    `accumulation_steps`, `ema_momentum`."""
    budgeted = optimizer is None and (
        learning_rate_schedule == "budget"
        or (learning_rate_schedule == "auto" and budget is not None)
    )
    if not budgeted:
        return optimizer, None
    schedule = BudgetSchedule(
        # The paper schedule's peak, reached after at most `warmup_steps`.
        recipe["learning_rate_scale"] * (model.d_model * recipe["warmup_steps"]) ** -0.5,
        train_steps,
        warmup_fraction=plan.warmup_fraction,
        max_warmup_steps=recipe["warmup_steps"],
        decay=plan.decay,
        accumulation_steps=recipe["accumulation_steps"],
    )
    optimizer = adam_optimizer(schedule, recipe["accumulation_steps"], recipe["ema_momentum"])
    return optimizer, schedule

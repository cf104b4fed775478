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

`train` under `TrainingSettings(budget=TimeBudget(seconds))` uses both
unless told otherwise
(`learning_rate_schedule`): `ScheduleFitter` fits the schedule to the
budget's clock. `model_dir/budget.json` records the estimate, so that a
resumed run starts from it.
"""

import json
import math
import os

import keras

from keras_transformer.training._distribute import broadcast_from_chief
from keras_transformer.training._distribute import is_chief
from keras_transformer.training._distribute import read_int
from keras_transformer.training.checkpoints import write_json_atomically
from keras_transformer.training.schedules import BudgetSchedule
from keras_transformer.training.time_budget import BudgetPlan
from keras_transformer.training.time_budget import TimeBudget
from keras_transformer_runtime import validation

BUDGET_FILE = "budget.json"


def read_budget(model_dir):
    """`model_dir/budget.json`, what the last `TimeBudget` estimated (keys
    `seconds_per_step`, `total_steps`, `warmup_updates`, `averaging_from`),
    or `None` when the run has none."""
    path = os.path.join(model_dir, BUDGET_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


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
                    "warmup_updates": self.schedule.warmup_updates(),
                    "averaging_from": self.averaging_from(),
                },
            )

    def averaging_from(self):
        """The first update of the averaging window: the last
        `averaging_fraction` of the estimated updates, after the warm-up."""
        total = self.total_steps
        start = total - math.floor(self.plan.averaging_fraction * total) + 1
        return max(start, self.schedule.warmup_updates(total) + 1)

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

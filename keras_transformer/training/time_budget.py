"""The clock and the plan of training within a time budget: `TimeBudget`
(when training must stop) and `BudgetPlan` (how the budget schedule and the
averaged checkpoints spread over it). Plain Python, on every backend;
`training.budget` fits the schedule to them while training runs."""

import dataclasses
import time

from keras_transformer.training.schedules import DECAYS
from keras_transformer_runtime import validation


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
    >>> result = train(model, batches, "runs/m30k", TrainingSettings(budget=budget))
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
    >>> settings = TrainingSettings(budget=TimeBudget(1800), budget_plan=plan)
    >>> train(model, batches, "runs/m30k", settings)
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

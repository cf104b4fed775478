"""The time budget of a `wmt_ende.py` run (`--budget_minutes`): training
gets what is left after the stages before it, less a reserve for the
stages after it (averaging, the final evaluation, plots, the export),
estimated from the validation evaluations' time per sentence as training
runs. examples/README.md says where the constants come from.
"""

import contextlib
import math
import sys
import time

import keras

from keras_transformer import training

# A greedy validation evaluation's time per sentence, until the first
# evaluation measures it.
GREEDY_SECONDS_PER_SENTENCE = 0.02
# The export and the plots: at least this, or
EXPORT_SECONDS = 45.0
# this many times the tracing of one search that the first validation
# evaluation shows on this machine: the export traces a search for each of
# its six translating signatures (a slower machine traces more slowly).
EXPORT_TRACINGS = 6
# The most of the time left at the start of training that the stages after
# it may reserve: an early evaluation of a barely trained model (outputs
# that run on to the length limit, the first call's tracing) can predict
# more than the whole budget, which would stop training at once.
# (0.5 did worse in a 5-minute run on the Multi30k files: 271 updates
# instead of 390-400, and a model whose outputs ran on made the final
# evaluation 1.6 min instead of 0.8-0.9; it ended 0.5 min late, against
# 0.1-0.3 min at 0.4. Intel Xeon, 2 cores.)
MAX_RESERVE_FRACTION = 0.4
# What the plots and the summary take after the final evaluation.
PLOTS_AND_SUMMARY_SECONDS = 5.0
# Budgets shorter than this cannot hold the stages that take their own
# time (the vocabulary, the final evaluation, the export): such a run says
# at its start how far past the budget they may take it.
SHORT_BUDGET_SECONDS = 300.0


def beam_cost(beam_size):
    """Final-evaluation time per sentence against a greedy validation
    evaluation's, at `beam_size` (examples/README.md: where it comes from)."""
    return 1.2 if beam_size == 1 else 1.75 * beam_size


class Stopwatch:
    """The wall time of each stage, and what is left of --budget_minutes:
    the run's one clock, from `started` (training's `TimeBudget` counts
    from it too)."""

    def __init__(self, budget_minutes=None, started=None):
        now = time.time()
        self.started = now if started is None else started
        self.budget = None if budget_minutes is None else 60.0 * budget_minutes
        # Python and TensorFlow's imports, before the first stage.
        self.seconds = {"startup": now - self.started}

    @contextlib.contextmanager
    def stage(self, name, outside_budget=False):
        """Times stage `name`; one `outside_budget` moves the clock's start
        on by its time, so that the budget does not count it."""
        start = time.time()
        try:
            yield
        finally:
            seconds = time.time() - start
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds
            if outside_budget:
                self.started += seconds

    def elapsed(self):
        """Seconds since the run started."""
        return time.time() - self.started

    def left(self):
        """Seconds left of the budget (`None` without one)."""
        if self.budget is None:
            return None
        return self.budget - self.elapsed()


def after_training_seconds(config, evaluator, data):
    """The estimated wall time of the stages after training, and of the
    validation evaluation that ends it: scoring the candidate weights
    (with training's evaluator, traced already), beam search on the valid
    and test sets, the plots and the export, from the last validation
    evaluation's time per sentence and the first's tracing (guesses before
    the first)."""
    per_sentence, tracing = GREEDY_SECONDS_PER_SENTENCE, 0.0
    if evaluator is not None and evaluator.history:
        per_sentence = evaluator.history[-1]["seconds"] / max(1, len(evaluator.sources))
        # The first evaluation also traced the search (the export's is bigger).
        tracing = max(0.0, evaluator.history[0]["seconds"] - evaluator.history[-1]["seconds"])
    sentences = len(data.test[0]) + (len(data.valid[0]) if data.valid else 0)
    seconds = sentences * per_sentence * beam_cost(config.beam_size)
    if evaluator is not None:
        validation = len(evaluator.sources) * per_sentence
        seconds += validation  # the last checkpoint's, when training stops
        if config.export_weights == "auto":
            seconds += 2 * validation  # two averages scored
    export = max(EXPORT_SECONDS, EXPORT_TRACINGS * tracing) if config.export_dir else 10.0
    return 1.1 * seconds + export


def capped_reserve(estimate, most, beyond=0.0):
    """The reserve for the stages after training, inside training's time
    limit: `estimate`, but at most `most` seconds, so that training keeps
    the rest of the budget; less `beyond`, the part of the budget that lies
    past training's limit anyway (when --max_train_minutes ends training
    before --budget_minutes would)."""
    return max(0.0, min(estimate, most) - beyond)


def training_seconds(config, stopwatch):
    """This run's training time limit: --max_train_minutes, and what is
    left of --budget_minutes (the stages after training are reserved
    within `train`)."""
    limits = [60.0 * config.max_train_minutes] if config.max_train_minutes else []
    if stopwatch.budget is not None:
        left = stopwatch.left()
        if left <= 0:
            sys.exit(
                f"--budget_minutes {config.budget_minutes}: no time left for training after "
                f"{stopwatch.budget - left:.0f} s of the stages before it."
            )
        limits.append(left)
    return min(limits) if limits else None


class ReserveForLaterStages(keras.callbacks.Callback):
    """Sets `budget.reserve_seconds` to what the stages after training will
    cost (`estimate()`, capped by `capped_reserve` with `most` and
    `beyond`), now and after every checkpoint interval: each validation
    evaluation says more of what translating costs."""

    def __init__(self, budget, estimate, most, beyond):
        super().__init__()
        self.budget, self.estimate, self.most, self.beyond = budget, estimate, most, beyond
        self.update()

    def update(self):
        self.budget.reserve_seconds = capped_reserve(self.estimate(), self.most, self.beyond)

    def on_epoch_end(self, epoch, logs=None):
        self.update()


def budget_plan(config):
    """How training spends its `TimeBudget`: --warmup_fraction, and
    --average_last checkpoints over the last --averaging_fraction."""
    return training.BudgetPlan(
        warmup_fraction=config.warmup_fraction,
        averaging_checkpoints=config.average_last,
        averaging_fraction=config.averaging_fraction,
    )


def training_budget(config, stopwatch, later_stages):
    """The `TimeBudget` of training and the callbacks that keep its reserve
    (`later_stages()` estimates the seconds of the stages after it): `(None,
    [])` without a time limit, unless the budget schedule is asked for,
    which then ends at --train_steps."""
    limit = training_seconds(config, stopwatch)
    if limit is None and config.learning_rate_schedule != "budget":
        return None, []
    # On the stopwatch's clock: training may run until `limit` from now.
    seconds = math.inf if limit is None else stopwatch.elapsed() + limit
    budget = training.TimeBudget(seconds, started=stopwatch.started)
    if stopwatch.budget is None:
        return budget, []
    left = stopwatch.left()
    beyond = max(0.0, left - limit)  # the budget past --max_train_minutes
    most = MAX_RESERVE_FRACTION * left
    print(budget_outlook(stopwatch, later_stages(), most))
    return budget, [ReserveForLaterStages(budget, later_stages, most, beyond)]


def budget_outlook(stopwatch, after_training, most):
    """The line a budgeted run prints as training starts: the seconds the
    stages before it took and those after it will take (`after_training`,
    estimated), and for a budget under `SHORT_BUDGET_SECONDS`, how far
    past it they may take the run (what the reserve, at most `most`
    seconds, cannot hold)."""
    before = stopwatch.elapsed()
    line = (
        f"budget: {stopwatch.budget / 60:g} min; {before:.0f} s before training (start-up, "
        f"data, vocabulary), about {after_training:.0f} s after it (evaluation, export)"
    )
    reserved = min(after_training, most)  # until evaluations measure it
    line += f"; {max(0.0, stopwatch.left() - reserved) / 60:.1f} min to train"
    over = max(0.0, after_training - most)
    if stopwatch.budget >= SHORT_BUDGET_SECONDS or over < 1.0:
        return line
    return (
        line + f". Under {SHORT_BUDGET_SECONDS / 60:g} min these fixed stages do not fit: "
        f"the run may end up to {over / 60:.1f} min past the budget."
    )

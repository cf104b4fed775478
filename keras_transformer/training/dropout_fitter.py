"""`DropoutFitter`: sets the model's P_drop from a `DropoutByPasses` and
the updates the run makes: at once under a fixed `train_steps`, at the
first checkpoint after the warm-up under a `TimeBudget`, when the
`ScheduleFitter`'s estimate has settled. The choice is recorded in
`model_dir/dropout.json` (`read_dropout`), and a resumed run keeps it.
"""

import json
import os

import keras

from keras_transformer.training._distribute import broadcast_from_chief
from keras_transformer.training._distribute import is_chief
from keras_transformer.training._distribute import read_int
from keras_transformer.training.checkpoints import write_json_atomically
from keras_transformer.training.dropout_by_passes import DropoutByPasses
from keras_transformer_runtime import validation

DROPOUT_FILE = "dropout.json"


def read_dropout(model_dir):
    """`model_dir/dropout.json`, the rate a `DropoutFitter` chose (keys
    `rate`, `passes`, `step`), or `None` when it chose none."""
    path = os.path.join(model_dir, DROPOUT_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return dict(json.load(f))


class DropoutFitter(keras.callbacks.Callback):
    """Sets the model's P_drop (`Transformer.set_dropout`) from the
    updates the run makes (`train` adds it for
    `TrainingSettings.dropout_by_passes`).

    With a `ScheduleFitter` (a time budget), it chooses at the end of the
    first epoch (checkpoint interval) past the warm-up, from the fitter's
    estimate of the run's updates, and makes the train function again
    (Keras traces a rate as a number: one retrace, 6-8 s of a 30-minute
    CPU run of the `small` model; under XLA every batch shape compiles
    again). Without one, it
    chooses as training begins, from `train_steps`. A run that chose
    before (`model_dir/dropout.json`) keeps its rate.

    Args:
        plan: the `DropoutByPasses`.
        train_steps: the run's updates without a time budget.
        fitter: the `ScheduleFitter` of a time budget, or `None`.
        model_dir: where `dropout.json` goes (the chief writes it; `None`:
            nowhere, and a resumed run chooses again).
        verbose: print the choice.
    """

    def __init__(self, plan, train_steps=None, fitter=None, model_dir=None, verbose=True):
        super().__init__()
        if not isinstance(plan, DropoutByPasses):
            raise ValueError(
                "`plan` must be a keras_transformer.training.DropoutByPasses. "
                f"Received: plan={plan!r}"
            )
        if fitter is None:
            validation.check_positive_int(train_steps=train_steps)
        self.plan, self.train_steps, self.fitter = plan, train_steps, fitter
        self.model_dir, self.verbose = model_dir, verbose
        self.chosen = None

    def on_train_begin(self, logs=None):
        stored = read_dropout(self.model_dir) if self.model_dir else None
        strategy = self.model.distribute_strategy
        (rate,) = broadcast_from_chief(strategy, [-1.0 if stored is None else stored["rate"]])
        if rate >= 0:  # the chief's earlier choice
            self.chosen = stored or {"rate": round(float(rate), 4)}
            self._set(self.chosen["rate"])
        elif self.fitter is None:
            self._choose(self.train_steps, read_int(self.model.optimizer.iterations))

    def on_epoch_end(self, epoch, logs=None):
        if self.chosen is not None or self.fitter is None:
            return
        step = read_int(self.model.optimizer.iterations)
        if self.fitter.seconds_per_step is None or step < self.fitter.schedule.warmup_updates():
            return
        self._choose(self.fitter.total_steps, step)

    def _choose(self, total_steps, step):
        # Every worker chooses alike: `total_steps` is the chief's (the
        # `ScheduleFitter` broadcasts its estimate) or `train_steps`.
        rate = self.plan.rate(total_steps)
        passes = round(self.plan.passes(total_steps), 2)
        self.chosen = {"rate": rate, "passes": passes, "step": step}
        if self.model_dir and is_chief(self.model.distribute_strategy):
            os.makedirs(self.model_dir, exist_ok=True)
            write_json_atomically(os.path.join(self.model_dir, DROPOUT_FILE), self.chosen)
        if self.verbose:
            print(f"dropout: {rate} for the {passes} passes over the training data of the run")
        self._set(rate)

    def _set(self, rate):
        if rate != self.model.dropout:
            self.model.set_dropout(rate)
            self.model.make_train_function(force=True)

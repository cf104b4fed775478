"""The callbacks `train` runs inside `model.fit`."""

import math
import time
from typing import NamedTuple

import keras

from keras_transformer.training._distribute import read_int
from keras_transformer.training.averaging import keep_for_averaging
from keras_transformer.training.checkpoints import all_finite


class LogRates(keras.callbacks.Callback):
    """Adds `learning_rate` and `tokens_per_sec` to the logs of every batch
    and epoch, where the progress bar and TensorBoard read them.

    Tokens come from the `TokenCount` metric (logged as `tokens`), which
    Keras resets at every epoch; the rate is over the epoch so far.
    """

    def __init__(self):
        super().__init__()
        self._epoch_start = None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self._add_rates(logs)

    def on_epoch_end(self, epoch, logs=None):
        self._add_rates(logs)

    def _add_rates(self, logs):
        if logs is None:
            return
        elapsed = time.perf_counter() - self._epoch_start
        if elapsed > 0:
            logs["tokens_per_sec"] = float(logs.get("tokens", 0.0)) / elapsed
        logs["learning_rate"] = float(self.model.optimizer.learning_rate)


class FitOutcome(NamedTuple):
    """How `fit` ended, as `CheckpointAndStop` saw it."""

    batches: int  # training batches run by this call of `fit`
    diverged_at: int | None  # the update at which the loss or weights went non-finite
    out_of_time: bool  # the budget stopped training
    last_saved: str | None  # the last checkpoint this call wrote


class CheckpointAndStop(keras.callbacks.Callback):
    """Writes a checkpoint at the end of every epoch (one checkpoint
    interval of `train`) in which a batch was trained on and the weights
    are all finite, and stops training:

    * at the first non-finite loss, or when the weights to be saved are not
      finite, without writing another checkpoint (`diverged_at` is then the
      update count): the last checkpoint is always a good one;
    * once the optimizer has made `train_steps` updates;
    * at the first update past the `budget` (a `TimeBudget`; `out_of_time`
      is then `True`), or at the end of the `fitter`'s schedule, where the
      budget holds no more updates (likewise).

    It also keeps the updates the `fitter` (a `ScheduleFitter`) wants for
    averaging, in `model_dir/averaging` (`keep_for_averaging`). After
    `fit`, `save_last` checkpoints an update inside an interval, and
    `outcome()` says how training ended.

    Args:
        manager: the run's `tf.train.CheckpointManager`.
        step: the checkpointed update-count variable, set before each save.
        train_steps: the total number of updates of the run.
        budget: an optional `TimeBudget`.
        fitter: an optional `ScheduleFitter` of the same budget.
        model_dir: the run's directory (needed with a `fitter`).
    """

    def __init__(self, manager, step, train_steps, budget=None, fitter=None, model_dir=None):
        super().__init__()
        self.manager = manager
        self.step = step
        self.train_steps = train_steps
        self.budget = budget
        self.fitter = fitter
        self.model_dir = model_dir
        self.diverged_at = None
        self.out_of_time = False
        self.last_saved = None
        self.batches = 0  # training batches run, by this call of `fit`
        self._batches_at_epoch_begin = 0

    def _updates(self):
        return read_int(self.model.optimizer.iterations)

    def on_epoch_begin(self, epoch, logs=None):
        self._batches_at_epoch_begin = self.batches

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            self.diverged_at = self._updates()
            self.model.stop_training = True
        elif self._updates() >= self.train_steps:
            self.model.stop_training = True
        elif self.budget is not None and (self.budget.left() < 0 or self._schedule_ended()):
            self.out_of_time = True
            self.model.stop_training = True
        elif self.fitter is not None and self.fitter.wants_checkpoint(self._updates()):
            self._keep_for_averaging()

    def _schedule_ended(self):
        """Whether the budget schedule has decayed to its end: the budget
        holds no more updates (at the fitter's last estimate), and one
        more would cost another interval's evaluation and checkpoint
        past it, at a learning rate of zero."""
        return self.fitter is not None and self._updates() >= self.fitter.total_steps

    def on_epoch_end(self, epoch, logs=None):
        if self.diverged_at is not None or self.batches == self._batches_at_epoch_begin:
            return  # nothing good, or nothing trained, to save
        self._save()

    def _save(self):
        """Checkpoints the current update if the weights are finite (and it
        is not saved yet); stops training as diverged otherwise."""
        if not self._finite_or_stop():
            return
        if self.last_saved is not None and read_int(self.step) == self._updates():
            return
        self.step.assign(self._updates())
        self.last_saved = self.manager.save(checkpoint_number=self._updates())

    def _keep_for_averaging(self):
        """Writes the current update for averaging if the weights are
        finite; stops training as diverged otherwise."""
        if not self._finite_or_stop():
            return
        keep_for_averaging(
            self.model,
            self.model_dir,
            self._updates(),
            self.fitter.averaging_from(),
            self.fitter.plan.averaging_checkpoints,
        )

    def _finite_or_stop(self):
        """Whether the weights are all finite; if not, training stops as
        diverged at the current update."""
        if all_finite(self.model.trainable_weights):
            return True
        self.diverged_at = self._updates()
        self.model.stop_training = True
        return False

    def save_last(self, trained_weights):
        """After `fit`: checkpoints the last update if `fit` ended inside an
        interval (the epoch ends are saved already) and the model holds the
        weights as trained (`trained_weights`: not moving averages, nor the
        best weights early stopping restored); a non-finite one counts as
        diverged instead."""
        final = self._updates()
        if self.diverged_at is not None or read_int(self.step) == final or not trained_weights:
            return
        if all_finite(self.model.trainable_weights):
            self.step.assign(final)
            self.last_saved = self.manager.save(checkpoint_number=final)
        else:
            self.diverged_at = final

    def outcome(self):
        """The `FitOutcome` of the last `fit`."""
        return FitOutcome(self.batches, self.diverged_at, self.out_of_time, self.last_saved)

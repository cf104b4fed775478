"""`TrainingRun`: one call of `train` on a `model_dir`, in the order it
happens: restore, catch up an owed evaluation, fit with the run's
callbacks, finish into a `TrainResult`."""

import dataclasses
import math
import os
import time

import keras
import tensorflow as tf

from keras_transformer.training._distribute import broadcast_from_chief
from keras_transformer.training._distribute import is_chief
from keras_transformer.training._distribute import read_int
from keras_transformer.training._keras_internals import moving_averages
from keras_transformer.training._keras_internals import multi_worker_fit
from keras_transformer.training.best import EvaluationLog
from keras_transformer.training.budget import read_budget
from keras_transformer.training.callbacks import CheckpointAndStop
from keras_transformer.training.callbacks import LogRates
from keras_transformer.training.checkpoints import check_run
from keras_transformer.training.checkpoints import checkpoint_manager
from keras_transformer.training.checkpoints import restore_latest
from keras_transformer.training.checkpoints import training_checkpoint
from keras_transformer.training.dropout_fitter import DropoutFitter
from keras_transformer.training.dropout_fitter import read_dropout
from keras_transformer.training.evaluation import ValidateOnAverages
from keras_transformer.training.records import keep_tokenizer
from keras_transformer.training.token_batches import TrainingInput
from keras_transformer.training.watching import evaluate_now
from keras_transformer.training.watching import owed_evaluation


class TrainingDivergedError(FloatingPointError):
    """The loss or the weights became NaN or infinite; the last good
    checkpoint is kept."""


class NoTrainingDataError(ValueError):
    """The training data produced no batch; the message says what the
    pipeline did with the pairs when it can tell (`make_batches`)."""


@dataclasses.dataclass
class TrainResult:
    """What `train` did.

    Attributes:
        initial_step: the update count restored from `model_dir` (0 for a
            new run).
        final_step: the update count at the end.
        history: `model.fit`'s history of this call (empty when the run
            was already finished).
        checkpoint: the path of the last checkpoint.
        seconds: wall time of this call.
        out_of_time: whether the `budget` stopped training.
        stopped_early: whether early stopping ended the run (in this call
            or an earlier one).
        best_checkpoint: the best checkpoint by `best`, or `None`.
        evaluations: every evaluation of the run so far (across restarts),
            oldest first: dicts of `step` and the `val_*` scores.
        budget: with the budget schedule under a `budget`, its last
            estimate (`read_budget`: the seconds per step, the updates
            it allows, the warm-up, where averaging starts); else `None`.
        batch_shapes: the `BatchShapes` of the training batches
            (`make_batches(static_shapes=True)`), else `None`.
        settings: the `TrainingSettings` the run trained with.
        dropout: with `dropout_by_passes`, the rate chosen (`rate`, the
            `passes` it was chosen for, the `step` it was set at), or
            `None` before it was chosen; else `None`.
    """

    initial_step: int
    final_step: int
    history: dict
    checkpoint: str
    seconds: float
    out_of_time: bool = False
    stopped_early: bool = False
    best_checkpoint: str | None = None
    evaluations: list = dataclasses.field(default_factory=list)
    budget: dict | None = None
    batch_shapes: object = None
    settings: object = None
    dropout: dict | None = None


@dataclasses.dataclass(frozen=True)
class Watching:
    """What a run evaluates and logs besides training (`train`'s
    arguments of the same names, and the `BestCheckpoints` of its
    settings)."""

    validation_data: object = None
    evaluator: object = None
    best: object = None
    callbacks: tuple = ()


class TrainingRun:
    """One call of `train` on `model_dir`, for a model compiled for
    training (`compile_for_training`). `run()` does it all; each step is a
    method, in the order they happen.

    Args:
        model: the compiled model.
        batches: `train`'s batches.
        model_dir: the run's directory.
        settings: the run's `TrainingSettings`.
        watching: the `Watching` of the run.
        fitter_of: with the budget schedule, `fitter_of(model_dir,
            seconds_per_step)` makes the run's `ScheduleFitter`; else None.

    Example:

    >>> settings = TrainingSettings(train_steps=100_000)
    >>> result = TrainingRun(compile_for_training(model, settings), batches, "runs/base",
    ...                      settings).run()
    """

    def __init__(self, model, batches, model_dir, settings, watching=Watching(), fitter_of=None):
        self.model, self.batches, self.model_dir = model, batches, model_dir
        self.settings, self.watching, self.fitter_of = settings, watching, fitter_of
        self.train_steps = settings.train_steps
        self.steps_per_checkpoint = settings.steps_per_checkpoint
        self.strategy = model.distribute_strategy
        self.started = time.perf_counter()

    def run(self):
        """Restores, catches up, trains and returns the `TrainResult`."""
        self.restore()
        self.catch_up_evaluation()
        if self.finished():
            return self.result_of_a_finished_run()
        fitter = self.schedule_fitter()
        stopper = self.checkpointing(fitter)
        history = self.fit(self.callbacks(stopper, fitter))
        return self.finish(history, stopper, fitter)

    def restore(self):
        """Checks that `model_dir` holds a run of this model (or none) and
        restores its latest checkpoint."""
        model = self.model
        with self.strategy.scope():
            # The optimizer's slots must exist before a checkpoint is restored.
            model.optimizer.build(model.trainable_variables)
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
            self.checkpoint = training_checkpoint(model, model.optimizer, self.step)
        # The batches, read once: the user's function is called here only.
        self.input = TrainingInput(self.batches, self.strategy)
        self.shapes, tokenizer = self.input.shapes, self.input.tokenizer
        check_run(
            self.model_dir,
            model,
            self.settings,
            None if tokenizer is None else tokenizer.fingerprint,
            bool(moving_averages(model.optimizer)),
            record=is_chief(self.strategy),
            batch_shapes=self.shapes.to_json() if self.shapes is not None else None,
        )
        if tokenizer is not None and is_chief(self.strategy):
            keep_tokenizer(self.model_dir, tokenizer)  # for Translator.from_run
        self.manager = checkpoint_manager(
            self.checkpoint, self.model_dir, self.strategy, self.settings.keep_checkpoints
        )
        self.latest = restore_latest(self.checkpoint, self.model_dir)
        self.initial_step = read_int(self.step)

    def catch_up_evaluation(self):
        """Attaches the evaluation log and the best checkpoints to the run,
        and makes the evaluation a crash skipped at the restored step."""
        watching = self.watching
        self.log = EvaluationLog(self.model_dir)
        self.log.set_model(self.model)
        self.log.start(self.initial_step)
        if watching.best is not None:
            watching.best.set_model(self.model)
            watching.best.start(self.model_dir, self.initial_step)
        owed = owed_evaluation(
            self.initial_step,
            self.log.evaluations,
            self.steps_per_checkpoint,
            self.train_steps,
            watching.evaluator,
            watching.validation_data,
        )
        if owed:
            logs = evaluate_now(
                self.model,
                self.initial_step,
                owed,
                watching.validation_data,
                self.settings.validation_steps,
                watching.evaluator,
            )
            for callback in (self.log, watching.best):
                if callback is not None:
                    callback.on_epoch_end(None, logs)

    def finished(self):
        """Whether the run was over before this call: all its updates made,
        or stopped early (and `best` allows no more patience)."""
        best = self.watching.best
        return self.initial_step >= self.train_steps or (best is not None and best.should_stop)

    def result_of_a_finished_run(self):
        """The `TrainResult` of a run that was over, with the weights `fit`
        would have left: the moving averages if kept, the best weights if
        it stopped early and `best` restores them."""
        self.model.optimizer.finalize_variable_values(self.model.trainable_variables)
        best = self.watching.best
        stopped_early = best is not None and best.should_stop
        if stopped_early and best.restore_best_weights:
            best.restore_best()
        return TrainResult(
            self.initial_step,
            self.initial_step,
            {},
            self.latest,
            0.0,
            stopped_early=stopped_early,
            best_checkpoint=best.best_path() if best is not None else None,
            evaluations=list(self.log.evaluations),
            batch_shapes=self.shapes,
            settings=self.settings,
            dropout=read_dropout(self.model_dir) if self.settings.dropout_by_passes else None,
        )

    def schedule_fitter(self):
        """The `ScheduleFitter` of the budget schedule (None without one),
        starting from the chief's last measured rate."""
        if self.fitter_of is None:
            return None
        stored = (read_budget(self.model_dir) or {}).get("seconds_per_step") or 0.0
        (stored,) = broadcast_from_chief(self.strategy, [stored])
        return self.fitter_of(self.model_dir if is_chief(self.strategy) else None, stored or None)

    def checkpointing(self, fitter):
        """The `CheckpointAndStop` callback of the run, keeping the updates
        `fitter` wants for averaging."""
        return CheckpointAndStop(
            self.manager, self.step, self.train_steps, self.settings.budget, fitter, self.model_dir
        )

    def callbacks(self, stopper, fitter):
        """Every callback of `fit`, in the order they must run: rates, the
        schedule fitter, the dropout fitter, checkpoints, evaluations, their
        log, the best checkpoints, the caller's, TensorBoard."""
        watching = self.watching
        evaluation = [watching.evaluator] if watching.evaluator is not None else []
        if moving_averages(self.model.optimizer) and watching.validation_data is not None:
            # `validation_data` is scored on the averages, as the evaluator's BLEU.
            evaluation.append(ValidateOnAverages())
        callbacks = [LogRates(), *([fitter] if fitter else []), *self.dropout_fitter(fitter)]
        callbacks += [stopper, *evaluation, self.log]
        callbacks += [watching.best] if watching.best is not None else []
        callbacks += list(watching.callbacks)
        if self.settings.tensorboard:
            callbacks.append(keras.callbacks.TensorBoard(os.path.join(self.model_dir, "logs")))
        return callbacks

    def dropout_fitter(self, fitter):
        """`[DropoutFitter]` for `settings.dropout_by_passes` (else `[]`),
        choosing from `fitter`'s estimate under a budget."""
        plan = self.settings.dropout_by_passes
        if plan is None:
            return []
        directory = self.model_dir if is_chief(self.strategy) else None
        verbose = self.settings.verbose != 0
        return [DropoutFitter(plan, self.train_steps, fitter, directory, verbose)]

    def fit(self, callbacks):
        """`model.fit` from the restored step to `train_steps`, one epoch
        per checkpoint interval."""
        with multi_worker_fit(self.model, self.strategy):
            return self.model.fit(
                self.input.dataset,
                epochs=math.ceil(self.train_steps / self.steps_per_checkpoint),
                initial_epoch=self.initial_step // self.steps_per_checkpoint,
                # micro-batches
                steps_per_epoch=self.steps_per_checkpoint * self.settings.accumulation_steps,
                validation_data=self.watching.validation_data,
                validation_steps=self.settings.validation_steps,
                callbacks=callbacks,
                shuffle=False,  # the input pipeline shuffles
                verbose=self.settings.verbose,
            )

    def finish(self, history, stopper, fitter):
        """The last checkpoint and the `TrainResult`; raises if no batch
        was trained on or training diverged."""
        best = self.watching.best
        if stopper.outcome().batches == 0:
            raise NoTrainingDataError(self.input.no_batch_message())
        stopped_early = best is not None and best.stopped_early
        stopper.save_last(not (moving_averages(self.model.optimizer) or stopped_early))
        outcome = stopper.outcome()
        if outcome.diverged_at is not None:
            raise TrainingDivergedError(
                f"The loss or the weights became NaN or infinite at step {outcome.diverged_at}. "
                "Training stopped; the last good checkpoint is "
                f"{outcome.last_saved or self.latest} "
                "(rerun to resume from it, e.g. with a lower learning_rate_scale)."
            )
        return TrainResult(
            self.initial_step,
            read_int(self.model.optimizer.iterations),
            history.history,
            self.manager.latest_checkpoint,
            time.perf_counter() - self.started,
            outcome.out_of_time,
            stopped_early=stopped_early,
            best_checkpoint=best.best_path() if best is not None else None,
            evaluations=list(self.log.evaluations),
            budget=read_budget(self.model_dir) if fitter is not None else None,
            batch_shapes=self.shapes,
            settings=self.settings,
            dropout=read_dropout(self.model_dir) if self.settings.dropout_by_passes else None,
        )

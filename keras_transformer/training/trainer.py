"""`train`: the paper's recipe around `model.fit`, resumable after a crash.

A run lives in `model_dir`:

    model_dir/checkpoints/ckpt-<step>.*   the last `keep_checkpoints` steps
    model_dir/averaging/ckpt-<step>.*     under a `TimeBudget`, the weights
                                          to average, spread over the end
    model_dir/evaluations.json            validation scores by step
    model_dir/best/                       the best checkpoints (`keep_best`)
    model_dir/logs/                       TensorBoard

Training is step-based: `model.fit` runs `train_steps / steps_per_checkpoint`
"epochs" of `steps_per_checkpoint` updates over a repeated dataset, and a
checkpoint (model, optimizer, step) is written after each. Rerunning the
same call after a crash restores the latest checkpoint and continues at its
step, so at most one checkpoint interval is repeated; a finished run
returns at once, and so does one that stopped early (unless the rerun
allows more patience).
"""

import dataclasses
import math
import os
import time

import keras
import tensorflow as tf

from keras_transformer import _backend
from keras_transformer.training._distribute import broadcast_from_chief
from keras_transformer.training._distribute import is_chief
from keras_transformer.training._distribute import read_int
from keras_transformer.training._keras_internals import moving_averages
from keras_transformer.training._keras_internals import multi_worker_fit
from keras_transformer.training.best import EvaluationLog
from keras_transformer.training.budget import ScheduleFitter
from keras_transformer.training.budget import TimeBudget
from keras_transformer.training.budget import read_budget
from keras_transformer.training.budget import recipe_optimizer
from keras_transformer.training.callbacks import CheckpointAndStop
from keras_transformer.training.callbacks import LogRates
from keras_transformer.training.checkpoints import all_finite
from keras_transformer.training.checkpoints import check_run
from keras_transformer.training.checkpoints import checkpoint_manager
from keras_transformer.training.checkpoints import restore_latest
from keras_transformer.training.checkpoints import training_checkpoint
from keras_transformer.training.compile import LEARNING_RATE_SCHEDULES
from keras_transformer.training.compile import compile_for_training
from keras_transformer.training.data import batch_shapes_of
from keras_transformer.training.data import no_batch_message
from keras_transformer.training.data import repeated_for_training
from keras_transformer.training.evaluation import ValidateOnAverages
from keras_transformer.training.watching import check_watched
from keras_transformer.training.watching import evaluate_now
from keras_transformer.training.watching import owed_evaluation
from keras_transformer_runtime import validation


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
            estimate (`read_budget`'s keys: `seconds_per_step`,
            `total_steps`, `warmup_steps`, `averaging_from`); else `None`.
        batch_shapes: the `BatchShapes` of the training batches
            (`make_batches(static_shapes=True)`), else `None`.
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


@_backend.tensorflow_only("training.train", "tf.distribute, tf.data and tf.train checkpoints")
def train(
    model,
    train_data,
    model_dir,
    train_steps,
    steps_per_checkpoint=1000,
    keep_checkpoints=5,
    validation_data=None,
    validation_steps=None,
    optimizer=None,
    warmup_steps=4000,
    learning_rate_scale=1.0,
    accumulation_steps=1,
    label_smoothing=0.1,
    jit_compile="auto",
    ema_momentum=None,
    learning_rate_schedule="auto",
    budget=None,
    evaluator=None,
    best=None,
    tokenizer=None,
    tensorboard=True,
    callbacks=(),
    verbose="auto",
):
    """Trains `model` with the paper's recipe for `train_steps` updates,
    resuming from `model_dir` if a previous run left checkpoints there.

    Create the model inside `strategy.scope()` to train under a
    `tf.distribute` strategy; `train` compiles it in the same scope
    (`compile_for_training`).

    Args:
        model: a `Transformer` (or any model taking `(source, target_in)`).
        train_data: a `tf.data.Dataset` of `((source, target_in),
            target_out)` (see `make_batches`), or a function
            `input_context -> dataset`, which under a multi-replica
            strategy goes through `distribute_datasets_from_function` so
            each replica builds its own share of the token budget. It is
            repeated as needed.
        model_dir: where checkpoints and logs go.
        train_steps: total optimizer updates (across restarts).
        steps_per_checkpoint: updates between checkpoints (and between
            validation runs, and by default evaluations).
        keep_checkpoints: how many recent checkpoints to keep.
        validation_data: optional dataset evaluated at each checkpoint.
        validation_steps: batches of `validation_data` per evaluation.
        optimizer, warmup_steps, learning_rate_scale, accumulation_steps,
            label_smoothing, jit_compile, ema_momentum: as in
            `compile_for_training`. Gradient accumulation reaches the
            paper's ~25,000 tokens per update on fewer devices.
        learning_rate_schedule: `"paper"`: `TransformerSchedule` (warm-up
            `warmup_steps`, then the inverse square root); `"budget"`: a
            `BudgetSchedule` of the same peak that warms up for a fraction
            of the run's updates (at most `warmup_steps`) and decays to
            zero at its end: at `train_steps`, or, under a `budget`, at the
            updates the budget allows (re-estimated as training runs).
            `"auto"` (default): the budget schedule under a `budget`, the
            paper's otherwise. Ignored when an `optimizer` is given.
        budget: a `TimeBudget`: training stops (and checkpoints) at the
            first update past it (`TrainResult.out_of_time`); its
            `warmup_fraction`, `decay` and averaging checkpoints shape the
            budget schedule (`averaging_checkpoint_paths`).
        evaluator: a `TranslationEvaluator` that adds validation BLEU and
            chrF (`val_bleu`, `val_chrf`) to the logs every
            `evaluator.every` updates (default, and a multiple of:
            `steps_per_checkpoint`). Unless set, its `log_dir` becomes
            `model_dir/logs/evaluation`.
        best: a `BestCheckpoints`: the best checkpoints by a validation
            score this run logs, kept in `model_dir/best/` whatever the
            regular rotation deletes, and early stopping on it. A rerun of
            a run that stopped early returns at once, unless its `best`
            allows more patience.
        tokenizer: the tokenizer of `train_data`, if it has a `fingerprint`
            (`SentencePieceTokenizer`): it is recorded with the checkpoints,
            and resuming with another one is refused.
        tensorboard: write TensorBoard logs to `model_dir/logs`.
        callbacks: more Keras callbacks.
        verbose: `model.fit` verbosity (the progress bar shows loss,
            accuracy, perplexity, learning rate and tokens/s).

    Every evaluation is recorded in `model_dir/evaluations.json`
    (`read_evaluations`). `model_dir/checkpoints/run.json` records the
    model's architecture and `accumulation_steps` (and the tokenizer's
    fingerprint): a rerun that differs raises `IncompatibleRunError`
    instead of restoring weights by position into another model; it also
    records the batches' shapes (`make_batches(static_shapes=True)`). A
    newest checkpoint that cannot be read is skipped with a warning;
    checkpoints are written only with finite weights.

    Returns:
        A `TrainResult`.

    Raises:
        TrainingDivergedError: the loss or the weights became NaN or
            infinite; the message names the last good checkpoint, which is
            kept.
        NoTrainingDataError: `train_data` produced no batch.
        IncompatibleRunError: `model_dir` holds a run of another model,
            tokenizer or `accumulation_steps`, or only unreadable
            checkpoints.

    Example:

    >>> result = train(model, batches, "runs/base", train_steps=100_000)

    Within 30 minutes, watching validation BLEU, keeping the best 5
    checkpoints and stopping after 5 evaluations without improvement:

    >>> evaluator = TranslationEvaluator(
    ...     Translator(model, tokenizer, beam_size=1), valid_sources, valid_references
    ... )
    >>> result = train(
    ...     model, batches, "runs/base", 100_000, budget=TimeBudget(30 * 60),
    ...     evaluator=evaluator, best=BestCheckpoints("val_bleu", keep=5, patience=5),
    ... )
    >>> [(e["step"], e["val_bleu"]) for e in result.evaluations]
    """
    validation.check_positive_int(
        train_steps=train_steps,
        steps_per_checkpoint=steps_per_checkpoint,
        keep_checkpoints=keep_checkpoints,
    )
    validation.check_choice(LEARNING_RATE_SCHEDULES, learning_rate_schedule=learning_rate_schedule)
    if budget is not None and not isinstance(budget, TimeBudget):
        raise ValueError(
            f"`budget` must be a keras_transformer.training.TimeBudget. Received: budget={budget!r}"
        )
    optimizer, schedule = recipe_optimizer(
        model,
        optimizer,
        learning_rate_schedule,
        budget,
        train_steps,
        warmup_steps=warmup_steps,
        learning_rate_scale=learning_rate_scale,
        accumulation_steps=accumulation_steps,
        ema_momentum=ema_momentum,
    )
    check_watched(model_dir, steps_per_checkpoint, validation_data, evaluator, best, tensorboard)
    strategy = model.distribute_strategy
    with strategy.scope():
        compile_for_training(
            model,
            optimizer,
            warmup_steps,
            learning_rate_scale,
            accumulation_steps,
            label_smoothing,
            jit_compile,
            ema_momentum,
        )
        # The optimizer's slots must exist before a checkpoint is restored.
        model.optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        checkpoint = training_checkpoint(model, model.optimizer, step)
    fingerprint = None if tokenizer is None else tokenizer.fingerprint
    averaged = bool(moving_averages(model.optimizer))
    shapes = batch_shapes_of(train_data, strategy)
    check_run(
        model_dir,
        model,
        accumulation_steps,
        fingerprint,
        averaged,
        record=is_chief(strategy),
        batch_shapes=shapes.to_json() if shapes is not None else None,
    )
    manager = checkpoint_manager(checkpoint, model_dir, strategy, keep_checkpoints)
    latest = restore_latest(checkpoint, model_dir)
    initial_step = read_int(step)
    start = time.perf_counter()
    log = EvaluationLog(model_dir)
    log.set_model(model)
    log.start(initial_step)
    if best is not None:
        best.set_model(model)
        best.start(model_dir, initial_step)
    owed = owed_evaluation(
        initial_step, log.evaluations, steps_per_checkpoint, train_steps, evaluator, validation_data
    )
    if owed:
        logs = evaluate_now(model, initial_step, owed, validation_data, validation_steps, evaluator)
        for callback in (log, best):
            if callback is not None:
                callback.on_epoch_end(None, logs)
    if initial_step >= train_steps or (best is not None and best.should_stop):
        # The weights `fit` would have left: the moving averages, if kept.
        model.optimizer.finalize_variable_values(model.trainable_variables)
        stopped_early = best is not None and best.should_stop
        if stopped_early and best.restore_best_weights:
            best.restore_best()
        return TrainResult(
            initial_step,
            initial_step,
            {},
            latest,
            0.0,
            stopped_early=stopped_early,
            best_checkpoint=best.best_path() if best is not None else None,
            evaluations=list(log.evaluations),
            batch_shapes=shapes,
        )

    fitter = None
    if schedule is not None and budget is not None:
        # A resumed run starts from the chief's last measured rate.
        stored = (read_budget(model_dir) or {}).get("seconds_per_step") or 0.0
        (stored,) = broadcast_from_chief(strategy, [stored])
        fitter = ScheduleFitter(
            schedule,
            budget,
            max_steps=train_steps,
            model_dir=model_dir if is_chief(strategy) else None,
            seconds_per_step=stored or None,
        )
    stopper = CheckpointAndStop(manager, step, train_steps, budget, fitter, model_dir)
    evaluation = [evaluator] if evaluator is not None else []
    if averaged and validation_data is not None:
        # `validation_data` is scored on the averages, as the evaluator's BLEU.
        evaluation.append(ValidateOnAverages())
    all_callbacks = [LogRates(), *([fitter] if fitter else []), stopper, *evaluation, log]
    all_callbacks += ([best] if best is not None else []) + list(callbacks)
    if tensorboard:
        all_callbacks.append(keras.callbacks.TensorBoard(os.path.join(model_dir, "logs")))
    with multi_worker_fit(model, strategy):
        history = model.fit(
            repeated_for_training(train_data, strategy),
            epochs=math.ceil(train_steps / steps_per_checkpoint),
            initial_epoch=initial_step // steps_per_checkpoint,
            steps_per_epoch=steps_per_checkpoint * accumulation_steps,  # micro-batches
            validation_data=validation_data,
            validation_steps=validation_steps,
            callbacks=all_callbacks,
            shuffle=False,  # the input pipeline shuffles
            verbose=verbose,
        )
    if stopper.batches == 0:
        raise NoTrainingDataError(no_batch_message(train_data))
    final_step = read_int(model.optimizer.iterations)
    stopped_early = best is not None and best.stopped_early
    # Inside an interval (the callback saves at every epoch end, so only if
    # `fit` ended otherwise), and with the weights as trained: not the
    # moving averages or the best weights `fit` may have left.
    trained_weights = not (moving_averages(model.optimizer) or stopped_early)
    if stopper.diverged_at is None and read_int(step) != final_step and trained_weights:
        if all_finite(model.trainable_weights):
            step.assign(final_step)
            manager.save(checkpoint_number=final_step)
        else:
            stopper.diverged_at = final_step
    if stopper.diverged_at is not None:
        last_good = stopper.last_saved or latest
        raise TrainingDivergedError(
            f"The loss or the weights became NaN or infinite at step {stopper.diverged_at}. "
            f"Training stopped; the last good checkpoint is {last_good} "
            "(rerun to resume from it, e.g. with a lower learning_rate_scale)."
        )
    return TrainResult(
        initial_step,
        final_step,
        history.history,
        manager.latest_checkpoint,
        time.perf_counter() - start,
        stopper.out_of_time,
        stopped_early=stopped_early,
        best_checkpoint=best.best_path() if best is not None else None,
        evaluations=list(log.evaluations),
        budget=read_budget(model_dir) if fitter is not None else None,
        batch_shapes=shapes,
    )

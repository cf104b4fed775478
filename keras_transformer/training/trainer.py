"""`train`: the paper's recipe around `model.fit`, resumable after a crash.

A run lives in `model_dir`:

    model_dir/checkpoints/ckpt-<step>.*   the last `keep_checkpoints` steps
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
from keras_transformer.training.best import KeepBestAndStopEarly
from keras_transformer.training.budget import BudgetSchedule
from keras_transformer.training.budget import TimeBudget
from keras_transformer.training.budget import read_budget
from keras_transformer.training.callbacks import CheckpointAndStop
from keras_transformer.training.callbacks import LogRates
from keras_transformer.training.checkpoints import all_finite
from keras_transformer.training.checkpoints import check_run
from keras_transformer.training.checkpoints import checkpoint_manager
from keras_transformer.training.checkpoints import restore_latest
from keras_transformer.training.checkpoints import training_checkpoint
from keras_transformer.training.devices import recommended_jit_compile
from keras_transformer.training.evaluation import SCORES
from keras_transformer.training.evaluation import TranslationEvaluator
from keras_transformer.training.evaluation import ValidateOnAverages
from keras_transformer.training.losses import LabelSmoothedCrossEntropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.metrics import Perplexity
from keras_transformer.training.metrics import TokenCount
from keras_transformer.training.schedules import adam_optimizer
from keras_transformer.training.schedules import paper_optimizer
from keras_transformer_runtime import _validation

JIT_COMPILE = ("auto", True, False)
LEARNING_RATE_SCHEDULES = ("auto", "paper", "budget")
# The validation logs of `fit` with `validation_data` (`compile_for_training`'s metrics).
VALIDATION_LOGS = ("val_loss", "val_accuracy", "val_perplexity")


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
        out_of_time: whether `max_seconds` stopped training.
        stopped_early: whether early stopping ended the run (in this call
            or an earlier one).
        best_checkpoint: the best checkpoint by `keep_best`, or `None`.
        evaluations: every evaluation of the run so far (across restarts),
            oldest first: dicts of `step` and the `val_*` scores.
        budget: with the budget schedule under `max_seconds`, its last
            estimate (`read_budget`'s keys: `seconds_per_step`,
            `total_steps`, `warmup_steps`, `averaging_from`); else `None`.
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


def compile_for_training(
    model,
    optimizer=None,
    warmup_steps=4000,
    learning_rate_scale=1.0,
    accumulation_steps=1,
    label_smoothing=0.1,
    jit_compile="auto",
    ema_momentum=None,
):
    """Compiles `model` with the paper's loss, metrics and optimizer.

    The loss is `LabelSmoothedCrossEntropy`; the metrics are
    `MaskedAccuracy`, `Perplexity` and `TokenCount`, all ignoring the
    model's `pad_id`. `train` compiles with this; call it yourself to run
    `fit` or `train_on_batch` with the same setup. It compiles inside the
    model's distribution strategy scope. It runs on every Keras backend
    (`train` itself needs TensorFlow); with `jit_compile="auto"` JAX and
    PyTorch get Keras's own default.

    Args:
        model: a `Transformer` (or any model with `d_model` and `pad_id`).
        optimizer: defaults to `paper_optimizer(model.d_model, ...)`.
        warmup_steps: schedule warm-up, 4000 in the paper.
        learning_rate_scale: schedule scale, 1 in the paper.
        accumulation_steps: micro-batches averaged into each update.
        label_smoothing: ε_ls, 0.1 in the paper.
        jit_compile: `"auto"` (`recommended_jit_compile()`), `True` or
            `False`.
        ema_momentum: keep a moving average of the weights
            (`paper_optimizer`); `None` (the paper) keeps none.

    Returns:
        The model.

    Example:

    >>> model = compile_for_training(Transformer.from_preset("tiny", vocab_size=100))
    >>> model.train_on_batch((source, target_in), target_out)
    """
    _validation.check_choice(JIT_COMPILE, jit_compile=jit_compile)
    _validation.check_positive_int(accumulation_steps=accumulation_steps)
    if optimizer is None:
        optimizer = paper_optimizer(
            model.d_model, warmup_steps, learning_rate_scale, accumulation_steps, ema_momentum
        )
    pad_id = model.pad_id
    arguments = {
        "optimizer": optimizer,
        "loss": LabelSmoothedCrossEntropy(label_smoothing, pad_id=pad_id),
        "metrics": [MaskedAccuracy(pad_id), Perplexity(pad_id), TokenCount(pad_id)],
    }
    if not _backend.is_tensorflow():  # JAX or PyTorch: Keras's own choice of compilation
        model.compile(**arguments, jit_compile=jit_compile)
        return model
    with model.distribute_strategy.scope():
        model.compile(
            **arguments,
            jit_compile=recommended_jit_compile() if jit_compile == "auto" else jit_compile,
        )
    return model


def _no_data_message(train_data):
    """Why no batch came out, with `make_batches`' pair counts if known."""
    dataset = train_data
    if callable(train_data) and not isinstance(train_data, tf.data.Dataset):
        dataset = train_data(tf.distribute.InputContext())
    counts = getattr(dataset, "pair_counts", None)
    reason = f": {counts()}" if counts else ""
    return (
        "The training data produced no batch, so nothing was trained" + reason + ". Check the "
        "input files, and that max_length fits the sentences."
    )


def _check_evaluation(
    model_dir,
    steps_per_checkpoint,
    validation_data,
    evaluator,
    keep_best,
    early_stopping_patience,
    restore_best_weights,
    tensorboard,
):
    """Checks what `train` is asked to watch, and sets the evaluator's
    defaults (`every`: each checkpoint; `log_dir`: `model_dir/logs/evaluation`)."""
    if evaluator is not None:
        if not isinstance(evaluator, TranslationEvaluator):
            raise ValueError(
                "`evaluator` must be a keras_transformer.training.TranslationEvaluator. "
                f"Received: evaluator={evaluator!r}"
            )
        if evaluator.every is None:
            evaluator.every = steps_per_checkpoint
        _validation.check_divisible(
            "evaluator.every", evaluator.every, "steps_per_checkpoint", steps_per_checkpoint
        )
        if tensorboard and evaluator.log_dir is None:
            evaluator.log_dir = os.path.join(model_dir, "logs", "evaluation")
    logged = (SCORES if evaluator is not None else ()) + (
        VALIDATION_LOGS if validation_data is not None else ()
    )
    if keep_best is not None and keep_best not in logged:
        raise ValueError(
            "`keep_best` must name a validation score that this run logs: "
            + (
                ", ".join(repr(name) for name in logged)
                or "none without an `evaluator` "
                "(for 'val_bleu', 'val_chrf') or `validation_data` (for 'val_loss')"
            )
            + f". Received: keep_best={keep_best!r}"
        )
    if keep_best is None and (early_stopping_patience is not None or restore_best_weights):
        raise ValueError(
            "Early stopping and `restore_best_weights` watch the score that `keep_best` names "
            "(e.g. keep_best='val_bleu'). Received: keep_best=None, "
            f"early_stopping_patience={early_stopping_patience!r}, "
            f"restore_best_weights={restore_best_weights!r}"
        )


def _repeated(train_data, strategy):
    """`train_data` (a dataset, or a function of an input context) repeated
    forever and, for a function, distributed over the replicas."""
    if isinstance(train_data, tf.data.Dataset) or not callable(train_data):
        return train_data.repeat()
    if strategy.num_replicas_in_sync > 1:
        return strategy.distribute_datasets_from_function(
            lambda context: train_data(context).repeat()
        )
    return train_data(tf.distribute.InputContext()).repeat()


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
    tensorboard=True,
    callbacks=(),
    verbose="auto",
    max_seconds=None,
    jit_compile="auto",
    tokenizer=None,
    evaluator=None,
    keep_best=None,
    keep_best_checkpoints=None,
    early_stopping_patience=None,
    early_stopping_min_delta=0.0,
    restore_best_weights=False,
    ema_momentum=None,
    learning_rate_schedule="auto",
    warmup_fraction=0.1,
    decay="linear",
    reserve_seconds=0.0,
    averaging_checkpoints=None,
    averaging_fraction=0.2,
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
            `compile_for_training`.
            Gradient accumulation reaches the paper's ~25,000 tokens per
            update on fewer devices.
        tensorboard: write TensorBoard logs to `model_dir/logs`.
        callbacks: more Keras callbacks.
        verbose: `model.fit` verbosity (the progress bar shows loss,
            accuracy, perplexity, learning rate and tokens/s).
        max_seconds: a wall-time budget for this call: training stops (and
            checkpoints) at the first update past it. `TrainResult.out_of_time`
            tells whether it did.
        tokenizer: the tokenizer of `train_data`, if it has a `fingerprint`
            (`SentencePieceTokenizer`): it is recorded with the checkpoints,
            and resuming with another one is refused.
        evaluator: a `TranslationEvaluator` that adds validation BLEU and
            chrF (`val_bleu`, `val_chrf`) to the logs every
            `evaluator.every` updates (default, and a multiple of:
            `steps_per_checkpoint`). Unless set, its `log_dir` becomes
            `model_dir/logs/evaluation`.
        keep_best: a validation score to rank checkpoints by (`"val_bleu"`,
            `"val_chrf"`, or with `validation_data` `"val_loss"`...): the
            best `keep_best_checkpoints` (default `keep_checkpoints`) are
            kept in `model_dir/best/`, whatever the regular checkpoints'
            rotation deletes (`best_checkpoint_paths`).
        early_stopping_patience: stop after this many evaluations in a row
            without improving the `keep_best` score by more than
            `early_stopping_min_delta` (Keras `EarlyStopping` semantics).
            A rerun of a run that stopped early returns at once, unless it
            allows more patience (or none: `None`).
        restore_best_weights: when training stops early, leave the best
            checkpoint's weights in `model` (otherwise, the last weights).
        learning_rate_schedule: `"paper"`: `TransformerSchedule` (warm-up
            `warmup_steps`, then the inverse square root); `"budget"`: a
            `BudgetSchedule` of the same peak that warms up for
            `warmup_fraction` of the run's updates (at most `warmup_steps`)
            and decays (`decay`: `"linear"` or `"cosine"`) to zero at its
            end: at `train_steps`, or, with `max_seconds`, at the updates
            the time budget allows, which a `TimeBudget` callback measures
            and re-estimates as training runs. `"auto"` (default): the
            budget schedule when `max_seconds` is set, the paper's
            otherwise. Ignored when an `optimizer` is given.
        reserve_seconds: with the budget schedule, time of `max_seconds`
            to leave for what follows training (a number, or a function
            of no argument re-read at every estimate, e.g. from measured
            evaluation times).
        averaging_checkpoints, averaging_fraction: with the budget
            schedule under `max_seconds`, checkpoint `averaging_checkpoints`
            (default `keep_checkpoints`) updates evenly spread over the
            last `averaging_fraction` of the budget, beside the regular
            ones; `averaging_checkpoint_paths` returns them.

    `model_dir/checkpoints/run.json` records the model's architecture and
    `accumulation_steps` (and the tokenizer's fingerprint): a rerun that
    differs raises `IncompatibleRunError` instead of restoring weights by
    position into another model. A newest checkpoint that cannot be read is
    skipped with a warning; checkpoints are written only with finite
    weights.

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

    Watching validation BLEU, keeping the best checkpoints and stopping
    after 5 evaluations without improvement:

    >>> evaluator = TranslationEvaluator(
    ...     Translator(model, tokenizer, beam_size=1), valid_sources, valid_references
    ... )
    >>> result = train(
    ...     model, batches, "runs/base", 100_000, evaluator=evaluator,
    ...     keep_best="val_bleu", early_stopping_patience=5,
    ... )
    >>> [(e["step"], e["val_bleu"]) for e in result.evaluations]
    """
    _validation.check_positive_int(
        train_steps=train_steps,
        steps_per_checkpoint=steps_per_checkpoint,
        keep_checkpoints=keep_checkpoints,
    )
    _validation.check_positive_int(
        allow_none=True,
        keep_best_checkpoints=keep_best_checkpoints,
        early_stopping_patience=early_stopping_patience,
    )
    _validation.check_non_negative(early_stopping_min_delta=early_stopping_min_delta)
    _validation.check_choice(LEARNING_RATE_SCHEDULES, learning_rate_schedule=learning_rate_schedule)
    if max_seconds is not None and not max_seconds > 0:
        raise ValueError(f"`max_seconds` must be positive. Received: max_seconds={max_seconds!r}")
    budgeted = optimizer is None and (
        learning_rate_schedule == "budget"
        or (learning_rate_schedule == "auto" and max_seconds is not None)
    )
    if budgeted:
        # The paper schedule's peak, reached after at most `warmup_steps`.
        schedule = BudgetSchedule(
            learning_rate_scale * (model.d_model * warmup_steps) ** -0.5,
            train_steps,
            warmup_fraction,
            warmup_steps,
            decay,
            accumulation_steps,
        )
        optimizer = adam_optimizer(schedule, accumulation_steps, ema_momentum)
    _check_evaluation(
        model_dir,
        steps_per_checkpoint,
        validation_data,
        evaluator,
        keep_best,
        early_stopping_patience,
        restore_best_weights,
        tensorboard,
    )
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
    fingerprint = getattr(tokenizer, "fingerprint", None)
    averaged = bool(moving_averages(model.optimizer))
    check_run(
        model_dir, model, accumulation_steps, fingerprint, averaged, record=is_chief(strategy)
    )
    manager = checkpoint_manager(checkpoint, model_dir, strategy, keep_checkpoints)
    latest = restore_latest(checkpoint, model_dir)
    initial_step = read_int(step)
    start = time.perf_counter()
    watcher = KeepBestAndStopEarly(
        model_dir,
        keep_best,
        (keep_best_checkpoints or keep_checkpoints) if keep_best else 0,
        early_stopping_patience,
        early_stopping_min_delta,
        restore_best_weights,
    )
    watcher.set_model(model)
    watcher.load(initial_step)
    if initial_step >= train_steps or watcher.should_stop:
        # The weights `fit` would have left: the moving averages, if kept.
        model.optimizer.finalize_variable_values(model.trainable_variables)
        if watcher.should_stop and restore_best_weights:
            watcher.restore_best()
        return TrainResult(
            initial_step,
            initial_step,
            {},
            latest,
            0.0,
            stopped_early=watcher.should_stop,
            best_checkpoint=watcher.best_path(),
            evaluations=list(watcher.evaluations),
        )

    budget = None
    if budgeted and max_seconds is not None:
        budget = TimeBudget(
            schedule,
            max_seconds,
            max_steps=train_steps,
            reserve_seconds=reserve_seconds,
            averaging_checkpoints=averaging_checkpoints or keep_checkpoints,
            averaging_fraction=averaging_fraction,
            model_dir=model_dir if is_chief(strategy) else None,
        )
        # A resumed run starts from the chief's last measured rate.
        stored = (read_budget(model_dir) or {}).get("seconds_per_step") or 0.0
        (stored,) = broadcast_from_chief(strategy, [stored])
        budget.seconds_per_step = stored or None
    stopper = CheckpointAndStop(manager, step, train_steps, max_seconds, budget)
    evaluation = [evaluator] if evaluator is not None else []
    if averaged and validation_data is not None:
        # `validation_data` is scored on the averages, as the evaluator's BLEU.
        evaluation.append(ValidateOnAverages())
    all_callbacks = [LogRates(), *([budget] if budget else []), stopper, *evaluation, watcher]
    all_callbacks += list(callbacks)
    if tensorboard:
        all_callbacks.append(keras.callbacks.TensorBoard(os.path.join(model_dir, "logs")))
    with multi_worker_fit(model, strategy):
        history = model.fit(
            _repeated(train_data, strategy),
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
        raise NoTrainingDataError(_no_data_message(train_data))
    final_step = read_int(model.optimizer.iterations)
    # Inside an interval (the callback saves at every epoch end, so only if
    # `fit` ended otherwise), and with the weights as trained: not the
    # moving averages or the best weights `fit` may have left.
    trained_weights = not (moving_averages(model.optimizer) or watcher.stopped_early)
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
        stopped_early=watcher.stopped_early,
        best_checkpoint=watcher.best_path(),
        evaluations=list(watcher.evaluations),
        budget=read_budget(model_dir) if budget is not None else None,
    )

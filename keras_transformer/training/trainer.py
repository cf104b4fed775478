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

from keras_transformer import _backend
from keras_transformer.training.budget import BudgetPlan
from keras_transformer.training.budget import ScheduleFitter
from keras_transformer.training.budget import TimeBudget
from keras_transformer.training.budget import recipe_optimizer
from keras_transformer.training.compile import LEARNING_RATE_SCHEDULES
from keras_transformer.training.compile import compile_for_training
from keras_transformer.training.run import TrainingRun
from keras_transformer.training.run import Watching
from keras_transformer.training.watching import check_watched
from keras_transformer_runtime import validation


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
    budget_plan=None,
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
            first update past it (`TrainResult.out_of_time`).
        budget_plan: a `BudgetPlan` (default: its defaults): the budget
            schedule's warm-up and decay, and the checkpoints kept for
            averaging (`averaging_checkpoint_paths`).
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
            and resuming with another one is refused. One with a config
            (`SentencePieceTokenizer`, `MarianTokenizer`) is kept with them
            too, for `Translator.from_run(model_dir)`.
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
    plan = BudgetPlan() if budget_plan is None else budget_plan
    if not isinstance(plan, BudgetPlan):
        raise ValueError(
            "`budget_plan` must be a keras_transformer.training.BudgetPlan (or None for the "
            f"defaults). Received: budget_plan={budget_plan!r}"
        )
    optimizer, schedule = recipe_optimizer(
        model,
        optimizer,
        learning_rate_schedule,
        budget,
        plan,
        train_steps,
        warmup_steps=warmup_steps,
        learning_rate_scale=learning_rate_scale,
        accumulation_steps=accumulation_steps,
        ema_momentum=ema_momentum,
    )
    check_watched(model_dir, steps_per_checkpoint, validation_data, evaluator, best, tensorboard)
    with model.distribute_strategy.scope():
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
    fitter_of = None
    if schedule is not None and budget is not None:

        def fitter_of(directory, seconds_per_step):
            return ScheduleFitter(
                schedule,
                budget,
                plan,
                max_steps=train_steps,
                model_dir=directory,
                seconds_per_step=seconds_per_step,
            )

    run = TrainingRun(
        model,
        train_data,
        model_dir,
        train_steps,
        steps_per_checkpoint=steps_per_checkpoint,
        keep_checkpoints=keep_checkpoints,
        accumulation_steps=accumulation_steps,
        watching=Watching(
            validation_data, validation_steps, evaluator, best, tensorboard, tuple(callbacks)
        ),
        budget=budget,
        fitter_of=fitter_of,
        tokenizer=tokenizer,
        verbose=verbose,
    )
    return run.run()

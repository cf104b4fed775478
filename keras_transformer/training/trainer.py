"""`train`: the paper's recipe around `model.fit`, resumable after a crash.

A run lives in `model_dir`:

    model_dir/checkpoints/ckpt-<step>.*   the last `keep_checkpoints` steps
    model_dir/checkpoints/run.json        the model, settings, tokenizer
    model_dir/averaging/ckpt-<step>.*     under a `TimeBudget`, the weights
                                          to average, spread over the end
    model_dir/evaluations.json            validation scores by step
    model_dir/best/                       the best checkpoints (`keep_best`)
    model_dir/logs/                       TensorBoard

Training is step-based (`TrainingSettings`): `model.fit` runs
`train_steps / steps_per_checkpoint`
"epochs" of `steps_per_checkpoint` updates over a repeated dataset, and a
checkpoint (model, optimizer, step) is written after each. Rerunning the
same call after a crash restores the latest checkpoint and continues at its
step, so at most one checkpoint interval is repeated; a finished run
returns at once, and so does one that stopped early (unless the rerun
allows more patience).
"""

from keras_transformer import _backend
from keras_transformer.models.transformer import Transformer
from keras_transformer.training import devices
from keras_transformer.training.best import BestCheckpoints
from keras_transformer.training.budget import ScheduleFitter
from keras_transformer.training.compile import compile_for_training
from keras_transformer.training.fine_tuning import prepare_fine_tuning_once
from keras_transformer.training.former_arguments import accepts_former_arguments
from keras_transformer.training.run import TrainingRun
from keras_transformer.training.run import Watching
from keras_transformer.training.settings import TrainingSettings
from keras_transformer.training.token_batches import TokenBatches
from keras_transformer.training.watching import check_watched


@_backend.tensorflow_only("training.train", "tf.distribute, tf.data and tf.train checkpoints")
@accepts_former_arguments
def train(
    model,
    batches,
    model_dir,
    settings=None,
    evaluator=None,
    validation_data=None,
    callbacks=(),
    optimizer=None,
):
    """Trains `model` as `settings` say, resuming from `model_dir` if a
    previous run left checkpoints there.

    Create the model inside `strategy.scope()` to train under a
    `tf.distribute` strategy; `train` compiles it in the same scope
    (`compile_for_training`), after freezing parts of it or adding LoRA
    factors if the settings ask for it (`prepare_fine_tuning`; a model
    with LoRA factors of the settings' rank is left as it is).

    Args:
        model: a `Transformer` (or any model taking `(source, target_in)`).
        batches: the `TokenBatches` of `make_batches`; a `tf.data.Dataset`
            of `((source, target_in), target_out)`; or a function
            `input_context -> TokenBatches` (or dataset), called once per
            input pipeline: under a multi-replica strategy through
            `distribute_datasets_from_function`, so each replica builds its
            own share of the token budget. Repeated as needed. The
            `TokenBatches`' tokenizer is kept with the run (resuming with
            another one is refused) for `Translator.from_run(model_dir)`,
            and its shapes recorded.
        model_dir: where checkpoints and logs go.
        settings: a `TrainingSettings` (default: the paper's recipe for
            100,000 updates): the updates, schedule, loss, accumulation,
            precision, budget, checkpoints kept, averaged and chosen,
            evaluations, EMA, freezing and LoRA.
        evaluator: a `TranslationEvaluator` that adds validation BLEU and
            chrF (`val_bleu`, `val_chrf`) to the logs every
            `settings.evaluate_every` updates (default: its own `every`,
            else each checkpoint). Unless set, its `log_dir` becomes
            `model_dir/logs/evaluation`.
        validation_data: a `TokenBatches` or dataset whose loss, accuracy
            and perplexity are logged at each checkpoint (`val_loss`, ...;
            `settings.validation_steps` batches).
        callbacks: more Keras callbacks.
        optimizer: your own optimizer instead of the settings' schedule
            and Adam.

    The former keyword arguments (`train_steps=` and every other settings
    field by its name, `best=`) still work for this release, each with a
    `DeprecationWarning` naming its settings field, and so does a number of
    updates in the settings' place.

    Every evaluation is recorded in `model_dir/evaluations.json`
    (`read_evaluations`). `model_dir/checkpoints/run.json` records the
    model's architecture, the settings and the tokenizer's fingerprint: a
    rerun with another model, tokenizer, or settings that shape its
    variables or what trains (`accumulation_steps`, `ema_momentum` set or
    not, `freeze`, `lora_rank`, `lora_alpha`) raises
    `IncompatibleRunError` listing every difference, instead of restoring
    weights by position into another model; other changed settings (more
    `train_steps`, another warm-up) are recorded anew. A newest
    checkpoint that cannot be read is skipped with a warning; checkpoints
    are written only with finite weights.

    Returns:
        A `TrainResult`.

    Raises:
        TrainingDivergedError: the loss or the weights became NaN or
            infinite; the message names the last good checkpoint, which is
            kept.
        NoTrainingDataError: `batches` produced no batch.
        IncompatibleRunError: `model_dir` holds a run of another model,
            tokenizer or settings, or only unreadable checkpoints.
        ValueError: `precision` other than the model's dtype policy;
            `dropout_by_passes` for a model that is not a `Transformer`.

    Example:

    >>> batches = make_batches(pairs, tokenizer, batch_tokens=4096, repeat=True)
    >>> result = train(model, batches, "runs/base", TrainingSettings(train_steps=100_000))

    Within 30 minutes, watching validation BLEU, keeping the best 5
    checkpoints and stopping after 5 evaluations without improvement:

    >>> evaluator = TranslationEvaluator(
    ...     Translator(model, tokenizer, beam_size=1), valid_sources, valid_references
    ... )
    >>> settings = TrainingSettings(
    ...     budget=TimeBudget(30 * 60), keep_best=5, best_monitor="val_bleu", patience=5
    ... )
    >>> result = train(model, batches, "runs/base", settings, evaluator=evaluator)
    >>> [(e["step"], e["val_bleu"]) for e in result.evaluations]
    """
    settings = TrainingSettings.of(settings)
    _check_precision(model, settings)
    if settings.dropout_by_passes is not None and not isinstance(model, Transformer):
        raise ValueError(
            "`dropout_by_passes` sets a Transformer's dropout (`Transformer.set_dropout`); "
            f"the model is a {type(model).__name__}. "
            f"Received: dropout_by_passes={settings.dropout_by_passes!r}"
        )
    if isinstance(validation_data, TokenBatches):
        validation_data = validation_data.dataset
    best = None
    if settings.keeps_best:
        best = BestCheckpoints(
            settings.best_monitor,
            keep=settings.keep_best,
            patience=settings.patience,
            min_delta=settings.min_delta,
            restore_best_weights=settings.restore_best_weights,
        )
    check_watched(model_dir, settings, validation_data, evaluator)
    with model.distribute_strategy.scope():
        if settings.fine_tunes:
            prepare_fine_tuning_once(
                model, settings.freeze, settings.lora_rank, settings.lora_alpha
            )
        schedule = None
        if optimizer is None:
            optimizer, schedule = settings.optimizer(model.d_model)
        compile_for_training(model, settings, optimizer)
    fitter_of = None
    if schedule is not None and settings.budget is not None:

        def fitter_of(directory, seconds_per_step):
            return ScheduleFitter(
                schedule,
                settings.budget,
                settings.budget_plan,
                max_steps=settings.train_steps,
                model_dir=directory,
                seconds_per_step=seconds_per_step,
            )

    watching = Watching(validation_data, evaluator, best, tuple(callbacks))
    return TrainingRun(model, batches, model_dir, settings, watching, fitter_of).run()


def _check_precision(model, settings):
    """Raises unless `settings.precision` is the model's dtype policy (or
    the model's own: `None`); no warning of emulated bfloat16 here (the
    model was built already)."""
    wanted = None if settings.precision is None else devices.policy_name(settings.precision)
    if wanted is not None and wanted != model.dtype_policy.name:
        raise ValueError(
            f"`precision` is {settings.precision!r} ({wanted}) but the model computes with "
            f"{model.dtype_policy.name!r}: build it with dtype=settings.dtype_policy(), or set "
            f"precision=None for the model's own. Received: precision={settings.precision!r}"
        )

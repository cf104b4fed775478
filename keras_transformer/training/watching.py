"""What `train` watches: the checks of its evaluator and best checkpoints,
and the evaluation that a resumed run owes."""

import os

from keras_transformer.training.evaluation import SCORES
from keras_transformer.training.evaluation import TranslationEvaluator
from keras_transformer.training.evaluation import ValidateOnAverages
from keras_transformer.training.evaluation import averaged_weights_in
from keras_transformer_runtime import validation

# The validation logs of `fit` with `validation_data` (`compile_for_training`'s metrics).
VALIDATION_LOGS = ("val_loss", "val_accuracy", "val_perplexity")


def check_watched(model_dir, settings, validation_data, evaluator):
    """Checks what `train` is asked to watch, and sets the evaluator's
    defaults (`every`: `settings.evaluate_every`, else each checkpoint;
    `log_dir`: `model_dir/logs/evaluation` with TensorBoard logs).

    Args:
        model_dir: the run's directory.
        settings: the run's `TrainingSettings`.
        validation_data: `fit`'s validation data, or `None`.
        evaluator: a `TranslationEvaluator`, or `None`.

    Raises:
        ValueError: an evaluator of another type, an evaluator whose
            `every` is not a multiple of `steps_per_checkpoint` or differs
            from `settings.evaluate_every`, or a `best_monitor` that the
            run does not log.
    """
    steps_per_checkpoint = settings.steps_per_checkpoint
    if evaluator is not None:
        if not isinstance(evaluator, TranslationEvaluator):
            raise ValueError(
                "`evaluator` must be a keras_transformer.training.TranslationEvaluator. "
                f"Received: evaluator={evaluator!r}"
            )
        wanted = settings.evaluate_every
        if wanted is not None and evaluator.every not in (None, wanted):
            raise ValueError(
                f"`evaluator.every` ({evaluator.every}) differs from the settings' "
                f"`evaluate_every`: set one. Received: evaluate_every={wanted}"
            )
        if evaluator.every is None:
            evaluator.every = wanted or steps_per_checkpoint
        validation.check_divisible(
            "evaluator.every", evaluator.every, "steps_per_checkpoint", steps_per_checkpoint
        )
        if settings.tensorboard and evaluator.log_dir is None:
            evaluator.log_dir = os.path.join(model_dir, "logs", "evaluation")
    if not settings.keeps_best:
        return
    logged = (SCORES if evaluator is not None else ()) + (
        VALIDATION_LOGS if validation_data is not None else ()
    )
    if settings.best_monitor not in logged:
        raise ValueError(
            "`best_monitor` must name a validation score that this run logs: "
            + (
                ", ".join(repr(name) for name in logged)
                or "none without an `evaluator` (for 'val_bleu', 'val_chrf') or "
                "`validation_data` (for 'val_loss')"
            )
            + f". Received: best_monitor={settings.best_monitor!r}"
        )


def owed_evaluation(
    step, evaluations, steps_per_checkpoint, train_steps, evaluator, validation_data
):
    """What a run resumed at `step` owes: the evaluation an uninterrupted
    run made there, if none is recorded (the run was killed while
    evaluating, after its checkpoint was written).

    Evaluations happen at epoch ends: every `steps_per_checkpoint`
    updates and at `train_steps`; the evaluator's at its `every` and at
    the last update. (A run stopped by its time budget that is resumed
    trains on instead, so its last evaluation comes at the next epoch end.)

    Args:
        step: the update the run resumes at.
        evaluations: the recorded evaluations (`evaluations.json`), dicts
            with a `"step"`.
        steps_per_checkpoint: updates per epoch.
        train_steps: the run's last update.
        evaluator: the `TranslationEvaluator`, or `None`.
        validation_data: `fit`'s validation data, or `None`.

    Returns:
        The set of what to evaluate (`evaluate_now`): `"loss"` with
        validation data, `"translation"` with an evaluator due then; empty
        when nothing is owed.
    """
    if step == 0 or any(e["step"] == step for e in evaluations):
        return set()
    last = step >= train_steps
    if not (last or step % steps_per_checkpoint == 0):
        return set()  # an averaging checkpoint inside an epoch
    owed = set()
    if validation_data is not None:
        owed.add("loss")
    if evaluator is not None and (last or step % evaluator.every == 0):
        owed.add("translation")
    return owed


def evaluate_now(model, step, owed, validation_data, validation_steps, evaluator):
    """The `val_*` logs the epoch end at `step` gave, for what is `owed`:
    `fit`'s validation and the evaluator's scores, on the weights it
    evaluates (the moving averages, if kept).

    Args:
        model: the model being trained.
        step: the update of the epoch end.
        owed: what `owed_evaluation` returned.
        validation_data, validation_steps: `fit`'s validation arguments.
        evaluator: the `TranslationEvaluator`, or `None`.

    Returns:
        `{"val_<name>": float}`.
    """
    logs = {}
    if "loss" in owed:
        results = model.evaluate(
            validation_data,
            steps=validation_steps,
            callbacks=[ValidateOnAverages()],
            return_dict=True,
            verbose=0,
        )
        logs.update({f"val_{name}": float(value) for name, value in results.items()})
    if "translation" in owed:
        evaluator.set_model(model)
        with averaged_weights_in(model):
            logs.update(evaluator.evaluate(step))
    return logs

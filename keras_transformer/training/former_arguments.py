"""The keyword arguments `train` and `compile_for_training` took before
`TrainingSettings`: accepted for one more release, each with a
`DeprecationWarning` that names the settings field it moved to."""

import functools
import inspect
import warnings

from keras_transformer.training.settings import TrainingSettings

# The settings fields that `train(best=BestCheckpoints(...))` moved to.
BEST_FIELDS = ("best_monitor", "keep_best", "patience", "min_delta", "restore_best_weights")


def accepts_former_arguments(function):
    """Wraps `function(model, ..., settings, ...)` so that its former
    keyword arguments (each a `TrainingSettings` field, or `best`) and a
    number of updates in the settings' place (`train(model, batches,
    model_dir, 100_000)`) still work, warned, merged into the settings.
    The wrapped function's signature is the new one."""
    signature = inspect.signature(function)
    names = set(signature.parameters)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        former = {name: kwargs.pop(name) for name in list(kwargs) if name not in names}
        bound = signature.bind_partial(*args, **kwargs)
        settings = bound.arguments.get("settings")
        if isinstance(settings, int) and not isinstance(settings, bool):
            former = {"train_steps": settings, **former}
            settings = None
        if former:
            settings = settings_with(settings, former, function.__name__)
        if settings is not None:
            bound.arguments["settings"] = settings
        return function(*bound.args, **bound.kwargs)

    return wrapper


def settings_with(settings, former, where):
    """`settings` (`None`: the defaults) with the `former` keyword
    arguments of `where` applied, each warned about.

    Raises:
        TypeError: a name that was never an argument of `where`.
        ValueError: `settings` of another type.
    """
    settings = TrainingSettings.of(settings)
    changes = {}
    for name, value in former.items():
        if name == "best":
            changes.update(_best_fields(value))
            moved = ", ".join(BEST_FIELDS)
        elif name in TrainingSettings.names():
            changes[name] = value
            moved = name
        else:
            raise TypeError(f"{where}() got an unexpected keyword argument {name!r}")
        warnings.warn(
            f"{where}({name}=...) is deprecated and will be removed in the next release: "
            f"pass TrainingSettings({moved}=...) as `settings`.",
            DeprecationWarning,
            stacklevel=4,
        )
    return settings.replace(**changes)


def _best_fields(best):
    """The settings of a `BestCheckpoints` (or `None`: none kept)."""
    from keras_transformer.training.best import BestCheckpoints  # `train`'s, TensorFlow's

    if best is None:
        return {"keep_best": 0, "patience": None}
    if not isinstance(best, BestCheckpoints):
        raise ValueError(
            f"`best` must be a keras_transformer.training.BestCheckpoints. Received: best={best!r}"
        )
    return {
        "best_monitor": best.monitor,
        "keep_best": best.keep,
        "patience": best.patience,
        "min_delta": best.min_delta,
        "restore_best_weights": best.restore_best_weights,
    }

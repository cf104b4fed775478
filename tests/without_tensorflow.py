"""The package where TensorFlow cannot be imported (a GPU machine with JAX or
PyTorch only): run as `python -m tests.without_tensorflow`, with
`KERAS_BACKEND` set, it blocks every import of TensorFlow, imports
`keras_transformer`, fits a tiny `Transformer` with the package's loss,
metrics and schedule, saves and loads it, and prints what it saw as JSON.
"""

import importlib.abc
import importlib.machinery
import json
import os
import sys
import tempfile

BLOCKED = ("tensorflow", "tensorflow_text", "tensorflow_datasets", "tf_keras", "tensorboard")


class NoTensorFlow(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Fails every import of `BLOCKED` with `ModuleNotFoundError`, as if
    none were installed. (`find_spec` answers with a spec of no origin,
    which `importlib.util.find_spec` callers such as torch._dynamo read as
    nothing to look at; the import itself fails in `create_module`.)
    `blocked` names more packages to block."""

    def __init__(self, blocked=()):
        self.blocked = BLOCKED + tuple(blocked)

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.blocked:
            return importlib.machinery.ModuleSpec(name, self, origin=None)
        return None

    def create_module(self, spec):
        raise ModuleNotFoundError(f"No module named {spec.name!r}", name=spec.name)

    def exec_module(self, module):
        raise AssertionError("never reached: create_module raises")


def refused(use):
    """The message of the `BackendError` that `use()` raises, or `None`."""
    import keras_transformer

    try:
        use()
    except keras_transformer.BackendError as error:
        return str(error)
    return None


def main():
    sys.meta_path.insert(0, NoTensorFlow())
    import keras
    import numpy as np

    import keras_transformer as kt
    from keras_transformer import training

    keras.utils.set_random_seed(0)
    model = kt.Transformer.from_preset(
        "tiny", vocab_size=40, num_layers=1, d_model=32, num_heads=2, d_ff=64, dropout=0.0
    )
    schedule = training.BudgetSchedule(1e-2, total_steps=40, warmup_fraction=0.1)
    training.compile_for_training(model, optimizer=training.adam_optimizer(schedule))
    rng = np.random.default_rng(0)
    ids = rng.integers(4, 40, (64, 8))
    source, target_in, target_out = ids, np.concatenate([np.full((64, 1), 2), ids[:, :-1]], 1), ids
    history = model.fit((source, target_in), target_out, batch_size=16, epochs=10, verbose=0)
    path = os.path.join(tempfile.mkdtemp(), "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    logits = keras.ops.convert_to_numpy(model((source[:2], target_in[:2])))
    reloaded = keras.ops.convert_to_numpy(loaded((source[:2], target_in[:2])))
    print(
        json.dumps(
            {
                "backend": keras.backend.backend(),
                "loss": [float(x) for x in history.history["loss"]],
                "accuracy": float(history.history["accuracy"][-1]),
                "reloaded_difference": float(np.abs(logits - reloaded).max()),
                "dtype_policy": training.dtype_policy("none"),
                "presets": sorted(kt.models.PRESETS),
                "translator": refused(lambda: kt.Translator),
                "make_batches": refused(lambda: training.make_batches),
                "decoding": refused(lambda: kt.decoding),
                "tensorflow_imported": any(name.split(".")[0] in BLOCKED for name in sys.modules),
            }
        )
    )


if __name__ == "__main__":
    main()

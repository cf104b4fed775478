"""The public API and the one-way dependency rule of the layout."""

import ast
import pathlib

import keras

import keras_transformer

PACKAGE_DIR = pathlib.Path(keras_transformer.__file__).parent
# Each package may import only from the packages listed for it.
ALLOWED = {
    "layers": {"layers"},
    "models": {"layers", "models"},
    "training": {"layers", "models", "training", "special_ids"},
    "decoding": {"decoding", "special_ids"},
    "tokenization": {"layers", "tokenization", "special_ids"},
    "translator.py": {"decoding", "layers", "tokenization", "special_ids"},
    "export": {"export", "translator"},
    "translate.py": set(),  # the CLI needs only tensorflow and tensorflow_text
}


SERIALIZABLE = (
    keras.layers.Layer,
    keras.losses.Loss,
    keras.metrics.Metric,
    keras.optimizers.schedules.LearningRateSchedule,
)


def test_all_names_resolve_and_are_registered():
    for name in keras_transformer.__all__:
        obj = getattr(keras_transformer, name)
        if isinstance(obj, type) and issubclass(obj, SERIALIZABLE):
            registered = keras.saving.get_registered_name(obj)
            assert registered == f"keras_transformer>{name}"
            assert keras.saving.get_registered_object(registered) is obj


def test_imports_run_one_way():
    for package, allowed in ALLOWED.items():
        target = PACKAGE_DIR / package
        for path in target.rglob("*.py") if target.is_dir() else [target]:
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module:
                    parts = node.module.split(".")
                    if parts[0] == "keras_transformer" and len(parts) > 1:
                        assert parts[1] in allowed, f"{path} imports {node.module}"

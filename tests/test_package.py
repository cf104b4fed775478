"""The public API and the layout's rules: imports run one way, the runtime
package needs neither TensorFlow nor Keras, and only one module touches
private Keras internals."""

import ast
import pathlib
import re

import keras

import keras_transformer
import keras_transformer_runtime

PACKAGE_DIR = pathlib.Path(keras_transformer.__file__).parent
RUNTIME_DIR = pathlib.Path(keras_transformer_runtime.__file__).parent
# Leaf modules that import nothing from the package but each other; any
# module may use them, as any may use `keras_transformer_runtime`, which
# imports nothing of ours. `tokenizer` is the `Tokenizer` type that
# training, the translator and the exports take.
SHARED = {"_backend", "special_ids", "tokenizer"}
# Each part of the package may import only from the parts listed for it (and
# from SHARED): layers <- models <- (training, decoding, tokenization) <-
# translator <- export.
ALLOWED = {
    "_backend.py": set(),
    "special_ids.py": set(),
    "tokenizer.py": {"special_ids"},
    "layers": {"layers"} | SHARED,
    "models": {"layers", "models"} | SHARED,
    # Training reads checkpoints into the layers' weight layout (`restoring`)
    # and gives a `Transformer` its guided alignment weight (`compile`).
    "training": {"layers", "models", "training"} | SHARED,
    "decoding": {"decoding"} | SHARED,
    "tokenization": {"tokenization"} | SHARED,
    # The translator loads a trained run back (`Translator.from_run`).
    "translator": {"models", "training", "decoding", "tokenization", "translator"} | SHARED,
    "pretrained": {"models", "tokenization", "pretrained"} | SHARED,
    "export": {"export", "translator"} | SHARED,
    "translate.py": set(),  # the runtime's command, kept under its former name
    "translate_corpus.py": set(),  # likewise
    "upgrade.py": {"layers"},  # the former layout's reshaping
}
# The only module allowed to use private attributes of Keras objects.
KERAS_INTERNALS = PACKAGE_DIR / "training" / "_keras_internals.py"

SERIALIZABLE = (
    keras.layers.Layer,
    keras.losses.Loss,
    keras.metrics.Metric,
    keras.optimizers.schedules.LearningRateSchedule,
)


def modules():
    return sorted(p for p in PACKAGE_DIR.rglob("*.py") if "__pycache__" not in p.parts)


def test_all_names_resolve_and_are_registered():
    for name in keras_transformer.__all__:
        obj = getattr(keras_transformer, name)
        if isinstance(obj, type) and issubclass(obj, SERIALIZABLE):
            registered = keras.saving.get_registered_name(obj)
            assert registered == f"keras_transformer>{name}"
            assert keras.saving.get_registered_object(registered) is obj


def test_every_part_of_the_package_has_import_rules():
    parts = {
        p.name for p in PACKAGE_DIR.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()
    }
    assert parts - {"__init__.py"} == set(ALLOWED)


def test_imports_run_one_way():
    for part, allowed in ALLOWED.items():
        target = PACKAGE_DIR / part
        for path in target.rglob("*.py") if target.is_dir() else [target]:
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module:
                    parts = node.module.split(".")
                    if parts[0] != "keras_transformer":
                        continue
                    imported = parts[1] if len(parts) > 1 else node.names[0].name
                    assert imported in allowed, f"{path} imports {imported} from the package"


def _protected_members(layer):
    """The underscored attributes of a built Keras layer: its class's
    extension interface (`_compute_attention`, `_int8_call`...) and its
    state (`_kernel`...)."""
    return {name for name in dir(layer) if name.startswith("_") and not name.startswith("__")}


def _subclassed_keras_layers():
    """`{module: the protected members it may use}`: those of the Keras
    layers the module's classes subclass, as keras-hub's subclasses of
    them use them (`CachedMultiHeadAttention` reads `_query_dense`...)."""
    attention = keras.layers.MultiHeadAttention(num_heads=2, key_dim=2)
    attention.build((1, 2, 2), (1, 2, 2))
    dense = keras.layers.EinsumDense("ab,bc->ac", output_shape=2, bias_axes="c")
    dense.build((1, 2))
    embedding = keras.layers.Embedding(2, 2)
    embedding.build()
    model = keras.Model()
    return {
        "models/_quantization.py": _protected_members(model),  # of `Transformer`
        "layers/multi_head_attention.py": _protected_members(attention),
        "layers/_attention_decoding.py": _protected_members(attention),  # its mixin
        "layers/_projection.py": _protected_members(dense),
        "layers/token_embedding.py": _protected_members(embedding),
    }


def test_private_keras_attributes_are_used_in_one_module_only():
    """Outside `training/_keras_internals.py`, a module uses no private
    attribute of Keras's but the protected interface of the Keras layers
    it subclasses."""
    trees = {path: ast.parse(path.read_text()) for path in modules()}
    # Private names the package defines itself (methods, attributes), and
    # the public methods of `typing.NamedTuple` (underscored only so that
    # they never clash with a field's name).
    own = {"_replace", "_asdict", "_fields", "_make"}
    for path, tree in trees.items():
        if path == KERAS_INTERNALS:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                own.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
    inherited = _subclassed_keras_layers()
    used = {
        (module, node.attr)
        for path, tree in trees.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and (node.attr not in own or path == KERAS_INTERNALS)
        and node.attr not in inherited.get(module := path.relative_to(PACKAGE_DIR).as_posix(), ())
    }
    assert used == {
        ("training/_keras_internals.py", "_distribute_strategy"),
        ("training/_keras_internals.py", "_model_variables_moving_average"),
    }


# Long modules are split by concern (CONTRIBUTING.md).
MAX_MODULE_LINES = 400


def test_modules_stay_under_the_line_limit():
    root = PACKAGE_DIR.parent
    paths = [
        *modules(),
        *RUNTIME_DIR.rglob("*.py"),
        *(root / "examples").rglob("*.py"),
        *(root / "benchmarks").rglob("*.py"),
    ]
    long = {
        str(path.relative_to(root)): count
        for path in paths
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_the_contributing_layout_names_every_module():
    text = (PACKAGE_DIR.parent / "CONTRIBUTING.md").read_text(encoding="utf-8")
    layout = text.split("## Layout", 1)[1].split("```")[1]
    named = set(re.findall(r"[A-Za-z_]\w*", layout))
    runtime = list(RUNTIME_DIR.rglob("*.py"))
    packages = {p.parent for p in [*modules(), *runtime]}
    missing = sorted(
        str(path.relative_to(PACKAGE_DIR.parent))
        for path in [*modules(), *runtime]
        if path.stem != "__init__" and path.stem not in named
    )
    missing += sorted(p.name for p in packages if p.name not in named)
    assert missing == []

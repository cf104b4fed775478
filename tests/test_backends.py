"""Keras 3's other backends: the layers and `Transformer` give TensorFlow's
numbers from one `.keras` file, docs/backends.md's JAX loop translates with a
model trained on TensorFlow, and the TensorFlow-only parts say so.

Run under JAX or PyTorch with `KERAS_BACKEND=jax python -m pytest tests`.
"""

import ast
import fcntl
import os
import pathlib

import keras
import numpy as np
import pytest

from keras_transformer import _backend
from keras_transformer.special_ids import EOS_ID
from tests import backend_cases

BACKEND = keras.backend.backend()
GUIDE = pathlib.Path(__file__).parents[1] / "docs" / "backends.md"
other_backends = pytest.mark.skipif(
    BACKEND == "tensorflow", reason="compares another backend with TensorFlow"
)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """TensorFlow's `.keras` files and outputs, written by a subprocess: into
    the directory that TENSORFLOW_REFERENCE_DIR names, once for every run
    that sets it (CI's JAX and PyTorch rounds), else into a fresh one."""
    directory = os.environ.get("TENSORFLOW_REFERENCE_DIR")
    if directory is None:
        directory = str(tmp_path_factory.mktemp("tensorflow_reference"))
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the workers of a run write it once
        if not os.path.exists(os.path.join(directory, "written")):
            backend_cases.reference_in_subprocess(directory)
            with open(os.path.join(directory, "written"), "w"):
                pass
    return directory


@pytest.mark.large  # compares with TensorFlow's reference
@other_backends
def test_layers_and_model_give_tensorflows_outputs_from_one_keras_file(reference):
    differences = backend_cases.compare(reference)
    cases = set(backend_cases.LAYERS) | set(backend_cases.MODELS) | {"fit, compile_for_training"}
    assert set(differences) == cases
    worst = {f"{case}: {key}": value for case, d in differences.items() for key, value in d.items()}
    assert max(worst.values()) <= 1e-4, worst
    # Not vacuous: a perturbed weight is seen.
    model = keras.saving.load_model(os.path.join(reference, "FeedForward.keras"))
    weight = model.trainable_weights[0]
    weight.assign(weight + 1e-3)
    expected = np.load(os.path.join(reference, "FeedForward.npz"))["output"]
    inputs = backend_cases.LAYERS["FeedForward"][1]
    assert np.abs(keras.ops.convert_to_numpy(model(inputs)) - expected).max() > 1e-4


def guide_function(name):
    """The function `name` from docs/backends.md's Python blocks, alone."""
    blocks = GUIDE.read_text().split("```python\n")[1:]
    for block in (b.split("```")[0] for b in blocks):
        for node in ast.parse(block).body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return ast.Module(body=[node], type_ignores=[])
    raise AssertionError(f"docs/backends.md defines no `{name}`")


@pytest.mark.large  # compares with TensorFlow's reference
@other_backends
def test_documented_loop_translates_with_a_model_trained_on_tensorflow(reference):
    from keras_transformer.special_ids import BOS_ID

    namespace = {"keras": keras, "np": np, "BOS_ID": BOS_ID, "EOS_ID": EOS_ID}
    exec(compile(guide_function("greedy_translate"), "docs/backends.md", "exec"), namespace)
    greedy_translate = namespace["greedy_translate"]
    model = keras.saving.load_model(os.path.join(reference, "reverser.keras"))
    data = np.load(os.path.join(reference, "reverser.npz"))
    same = correct = 0
    limit = backend_cases.REVERSER_MAX_LENGTH
    for source, tensorflow_ids in zip(data["sources"], data["greedy"], strict=True):
        source_ids = list(source[: list(source).index(EOS_ID)])
        output = greedy_translate(model, source_ids, max_length=limit)
        expected = list(tensorflow_ids[: list(tensorflow_ids).index(EOS_ID)])
        # At its limit the search forces EOS into the last slot; the loop stops.
        same += (
            output[: limit - 1] == expected if len(expected) == limit - 1 else output == expected
        )
        correct += output == source_ids[::-1]
    assert same == len(data["sources"])  # the package's TensorFlow greedy search
    # It learned to reverse (95% here; chance is nil), so equal outputs mean
    # something; the bound leaves room for other CPUs' rounding in training.
    assert correct >= 0.75 * len(data["sources"]), correct


def tensorflow_only_calls():
    """One call of every TensorFlow-only entry point, by name."""
    from keras_transformer import Translator
    from keras_transformer import decoding
    from keras_transformer import export
    from keras_transformer import tokenization
    from keras_transformer import training

    return {
        "training.train": lambda: training.train(None, None, "unused"),
        "training.make_batches": lambda: training.make_batches(None, None, 100),
        "training.text_pairs_from_lists": lambda: training.text_pairs_from_lists([], []),
        "training.average_checkpoints": lambda: training.average_checkpoints(None, []),
        "training.get_strategy": lambda: training.get_strategy(),
        "training.TranslationEvaluator": lambda: training.TranslationEvaluator(None, [], []),
        "decoding.greedy_search": lambda: decoding.greedy_search(None, {}, 1, 5),
        "decoding.beam_search": lambda: decoding.beam_search(None, {}, 1, 5),
        "decoding.sample": lambda: decoding.sample(None, {}, 1, 5),
        "SentencePieceTokenizer": lambda: tokenization.SentencePieceTokenizer(b""),
        "tokenization.train_sentencepiece": lambda: tokenization.train_sentencepiece([], 100),
        "Translator": lambda: Translator(None, None),
        "export.export_saved_model": lambda: export.export_saved_model(None, "unused"),
        "export.export_ctranslate2": lambda: export.export_ctranslate2(None, "unused"),
    }


def test_tensorflow_only_parts_raise_a_backend_error_naming_the_requirement(monkeypatch):
    if BACKEND == "tensorflow":  # what a JAX user sees
        monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    shown = keras.backend.backend()
    for name, call in tensorflow_only_calls().items():
        with pytest.raises(_backend.BackendError) as error:
            call()
        message = str(error.value)
        assert f"`{name}` needs the TensorFlow backend" in message, message
        assert f"running on {shown!r}" in message and "KERAS_BACKEND=tensorflow" in message

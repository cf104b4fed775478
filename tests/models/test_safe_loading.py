"""`.keras` files from elsewhere: Keras's safe mode stays on."""

import json
import os
import warnings
import zipfile

import keras
import numpy as np
import pytest

from keras_transformer.layers import FeedForward


def craft(path, crafted_path, activation):
    """A copy of the `.keras` file at `path` whose FeedForward activation
    is replaced by `activation` (a serialized object)."""
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(crafted_path, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "config.json":
                config = json.loads(data)
                for layer in config["config"]["layers"]:
                    if layer["class_name"] == "FeedForward":
                        layer["config"]["activation"] = activation
                data = json.dumps(config).encode()
            target.writestr(item, data)


def test_a_file_with_a_lambda_activation_is_refused_and_runs_nothing(tmp_path):
    marker = str(tmp_path / "the lambda ran")
    inputs = keras.Input((3, 2))
    path, crafted = str(tmp_path / "model.keras"), str(tmp_path / "crafted.keras")
    keras.Model(inputs, FeedForward(d_ff=4)(inputs)).save(path)
    with warnings.catch_warnings():  # Keras warns that it serializes a lambda
        warnings.filterwarnings("ignore", "The object being serialized includes a `lambda`")
        code = keras.saving.serialize_keras_object(
            lambda x: (open(marker, "w").close(), x)[1]  # writes a file when it runs
        )
    craft(path, crafted, code)
    # Keras refuses (a ValueError inside the TypeError of the failed layer).
    with pytest.raises((TypeError, ValueError), match="deserialization of a Python lambda"):
        keras.saving.load_model(crafted)
    assert not os.path.exists(marker)
    # The crafted file does carry code that runs once deserialization is allowed.
    unsafe = keras.saving.load_model(crafted, safe_mode=False)
    unsafe(np.zeros((1, 3, 2), "float32"))
    assert os.path.exists(marker)

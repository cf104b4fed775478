"""`import keras_transformer` where TensorFlow cannot be imported (a GPU
machine with JAX or PyTorch only): the model and its training recipe work,
the TensorFlow parts say what they need. Each backend's round of CI runs
its own case (`KERAS_BACKEND=jax` or `torch`), in a process that blocks
every import of TensorFlow."""

import json
import os
import subprocess
import sys

import keras
import pytest

pytestmark = pytest.mark.large  # starts a Python process


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_package_imports_and_trains_without_tensorflow(backend):
    if keras.backend.backend() != backend:
        pytest.skip(f"the KERAS_BACKEND={backend} round runs it")
    output = subprocess.run(
        [sys.executable, "-m", "tests.without_tensorflow"],
        env={**os.environ, "KERAS_BACKEND": backend},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    seen = json.loads(output.strip().splitlines()[-1])
    assert seen["backend"] == backend
    assert not seen["tensorflow_imported"]
    # `fit` with the package's loss, metrics and budget schedule learns.
    assert seen["loss"][-1] < 0.85 * seen["loss"][0]
    assert seen["accuracy"] > 1 / 36  # better than chance over the 36 real ids
    assert seen["reloaded_difference"] < 1e-6
    assert seen["dtype_policy"] == "float32"
    assert seen["presets"] == ["base", "big", "small", "tiny"]
    for name in ("translator", "make_batches", "decoding"):
        assert "needs TensorFlow" in seen[name] and "cannot be imported here" in seen[name]

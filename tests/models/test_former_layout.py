"""A `Transformer` saved by keras_transformer 0.1 (attention kernels
`(d_model, heads * depth)`, tests/fixtures/former_layout, trained one step
so that Adam holds moments) loads with today's layout, its logits as they
were: the model alone at once, the optimizer's state through
`python -m keras_transformer.upgrade`."""

import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_transformer.upgrade import upgrade
from tests.test_case import assert_close

FORMER = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "former_layout"
EXPECTED = np.load(FORMER / "transformer_outputs.npz")


def _logits(model):
    return model((EXPECTED["source"], EXPECTED["target"]))


def test_the_model_alone_loads_with_the_same_logits():
    model = keras.saving.load_model(FORMER / "transformer.keras", compile=False)
    assert tuple(model.decoder.stack[0].cross_attention.key_dense.kernel.shape) == (16, 2, 8)
    assert_close(_logits(model), EXPECTED["logits"], atol=1e-5)


def test_with_its_optimizer_it_is_refused_naming_the_upgrade():
    with pytest.raises(ValueError, match="python -m keras_transformer.upgrade"):
        keras.saving.load_model(FORMER / "transformer.keras")


def test_the_upgrade_keeps_the_optimizer_s_moments(tmp_path):
    new = upgrade(FORMER / "transformer.keras", tmp_path / "new.keras")
    model = keras.saving.load_model(new)
    assert_close(_logits(model), EXPECTED["logits"], atol=1e-5)
    moments = next(v for v in model.optimizer.variables if "query" in v.path and "kernel" in v.path)
    assert_close(moments, EXPECTED["moments"].reshape(16, 2, 8), atol=0)
    with pytest.raises(FileExistsError, match="Not overwriting"):
        upgrade(FORMER / "transformer.keras", new)


@pytest.mark.large  # starts a Python process
def test_the_upgrade_command(tmp_path):
    command = [sys.executable, "-m", "keras_transformer.upgrade"]
    new = tmp_path / "new.keras"
    done = subprocess.run(
        [*command, str(FORMER / "transformer.keras"), str(new)], text=True, capture_output=True
    )
    assert done.returncode == 0 and new.is_file(), done.stderr[-2000:]
    again = subprocess.run(
        [*command, str(FORMER / "transformer.keras"), str(new)], text=True, capture_output=True
    )
    assert again.returncode == 2 and "Not overwriting" in again.stderr

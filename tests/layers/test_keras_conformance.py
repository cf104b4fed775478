"""Keras's own tests of `keras.layers.MultiHeadAttention`, run on ours.

`../shared/conformance/keras-3.15.1/multi_head_attention_test.py` is Keras
3.15.1's test file, unchanged (the workplace's `shared/conformance/README.md`
says where it comes from). It is loaded here as it is, with its
`layers.MultiHeadAttention` pointed at `keras_transformer.layers
.MultiHeadAttention` (every other `layers.X` stays Keras's), and its test
class is collected as this module's: whatever it checks of Keras's layer
(arguments, shapes, masks, serialization, initializers, constraints, LoRA,
int8 quantization, dtype policy maps, flash attention) it checks of ours.
"""

import importlib.util
import pathlib

import pytest
from keras.src import layers as keras_layers

from keras_transformer.layers import MultiHeadAttention

CONFORMANCE_FILE = (
    pathlib.Path(__file__).resolve().parents[3]
    / "shared"
    / "conformance"
    / "keras-3.15.1"
    / "multi_head_attention_test.py"
)

# Keras's file runs under Keras's own warning filters (keras-team/keras's
# pyproject.toml: every warning an error but these kinds), as in Keras's CI:
# its test_lora warns (of its unnamed dict inputs, of an optimizer with no
# state saved) with Keras's own layer as with ours.
KERAS_IGNORES = (
    "DeprecationWarning",
    "ImportWarning",
    "RuntimeWarning",
    "PendingDeprecationWarning",
    "FutureWarning",
    "UserWarning",
)
pytestmark = [
    pytest.mark.large,  # it fits, saves and loads models (test_lora, the layer tests' checks)
    *(pytest.mark.filterwarnings(f"ignore::{kind}") for kind in KERAS_IGNORES),
]

if not CONFORMANCE_FILE.is_file():
    pytest.skip(
        f"Keras's test file is not in this workplace: {CONFORMANCE_FILE}",
        allow_module_level=True,
    )


class KerasLayersWithOurAttention:
    """`keras.src.layers`, with `MultiHeadAttention` ours."""

    MultiHeadAttention = MultiHeadAttention

    def __getattr__(self, name):
        return getattr(keras_layers, name)


def _keras_test_module():
    spec = importlib.util.spec_from_file_location("keras_mha_conformance", CONFORMANCE_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.layers = KerasLayersWithOurAttention()  # read by the tests when they run
    return module


MultiHeadAttentionTest = _keras_test_module().MultiHeadAttentionTest

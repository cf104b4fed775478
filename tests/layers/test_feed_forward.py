import numpy as np
import pytest

from keras_transformer.layers import FeedForward
from tests import reference
from tests.layers import weight_counts
from tests.test_case import assert_close
from tests.test_case import run_layer_test


def test_layer_contract():
    run_layer_test(
        FeedForward,
        dict(d_ff=32, dropout=0.1),
        np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32"),
        expected_output_shape=(2, 5, 8),
        expected_num_trainable_weights=weight_counts.FEED_FORWARD,
    )


def test_equals_relu_formula():
    x = np.random.default_rng(1).normal(size=(3, 4, 8)).astype("float32")
    layer = FeedForward(d_ff=32)
    assert_close(layer(x), reference.feed_forward(x, layer), atol=1e-5)


def test_weights_have_the_papers_shapes():
    layer = FeedForward(d_ff=2048)
    layer.build((None, None, 512))
    shapes = sorted(tuple(w.shape) for w in layer.weights)
    assert shapes == [(512,), (512, 2048), (2048,), (2048, 512)]


@pytest.mark.parametrize(
    "kwargs, name", [(dict(d_ff=0), "d_ff"), (dict(d_ff=4, dropout=1.5), "dropout")]
)
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"Received: {name}="):
        FeedForward(**kwargs)

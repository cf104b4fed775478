"""The phrase layout of terminology constraints."""

import numpy as np
import pytest

from keras_transformer.decoding.phrases import right_aligned

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design


def test_right_aligned_phrases():
    np.testing.assert_array_equal(
        right_aligned([[[5, 6], [7]], []]),
        [[[5, 6], [-1, 7]], [[-1, -1], [-1, -1]]],
    )
    assert right_aligned([[], []]).shape == (2, 1, 1)
    with pytest.raises(ValueError, match=r"none negative. Received: phrase \[3, -2\]"):
        right_aligned([[[3, -2]]])

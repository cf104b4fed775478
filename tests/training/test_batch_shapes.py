"""`BatchShapes.fit` against brute force: the fewest padded positions that
any set of at most `max_shapes` lengths gives."""

import itertools

import numpy as np
import pytest

from keras_transformer.training import BatchShapes


def summed_lengths(longer, lengths):
    """What the pairs take of their batches: each its bucket's length."""
    lengths = np.asarray(lengths)
    return int(lengths[np.searchsorted(lengths, longer, side="left")].sum())


def test_fitted_lengths_pad_least_of_all_grids():
    rng = np.random.default_rng(0)
    for _ in range(200):
        max_length = int(rng.integers(3, 13))
        source = rng.integers(1, max_length + 1, int(rng.integers(1, 25)))
        target = np.clip(source + rng.integers(-2, 3, source.size), 1, max_length)
        max_shapes = int(rng.integers(1, 6))
        shapes = BatchShapes.fit(source, target, 64, max_length, max_shapes)
        longer = np.maximum(source, target)
        assert shapes.lengths[-1] == max_length and len(shapes.lengths) <= max_shapes
        assert list(shapes.lengths) == sorted(set(shapes.lengths))
        best = min(
            summed_lengths(longer, [*inner, max_length])
            for count in range(max_shapes)
            for inner in itertools.combinations(range(1, max_length), count)
        )
        assert summed_lengths(longer, shapes.lengths) == best


def test_few_lengths_get_a_bucket_each_and_the_measures_are_exact():
    source, target = [3, 5, 5, 9], [4, 5, 6, 9]
    shapes = BatchShapes.fit(source, target, batch_tokens=40, max_length=16)
    assert shapes.lengths == (4, 5, 6, 9, 16)
    assert shapes.batch_sizes == (10, 8, 6, 4, 2)
    assert shapes.shapes == [(10, 4), (8, 5), (6, 6), (4, 9), (2, 16)]
    # Positions 4 + 5 + 6 + 9 = 24: source 22 real, target 24.
    assert shapes.source_padding == pytest.approx(1 - 22 / 24)
    assert shapes.target_padding == 0
    # Batches: 1/10 + 1/8 + 1/6 + 1/4 of one each.
    assert shapes.target_tokens_per_batch == pytest.approx(24 / (1 / 10 + 1 / 8 + 1 / 6 + 1 / 4))
    assert shapes.pairs == 4
    assert "5 batch shapes" in str(shapes) and "4 pairs" in str(shapes)
    assert shapes.to_json()["lengths"] == [4, 5, 6, 9, 16]


def test_no_pairs_gives_one_bucket_of_max_length():
    shapes = BatchShapes.fit([], [], batch_tokens=64, max_length=32)
    assert shapes.lengths == (32,) and shapes.batch_sizes == (2,)
    assert shapes.target_tokens_per_batch == 0


@pytest.mark.parametrize(
    "arguments, name",
    [
        (dict(max_shapes=0), "max_shapes"),
        (dict(batch_tokens=-1), "batch_tokens"),
        (dict(target_lengths=[3]), "target_lengths"),
        (dict(source_lengths=[3, 40]), "max_length"),
    ],
)
def test_bad_arguments(arguments, name):
    values = (
        dict(source_lengths=[3, 4], target_lengths=[4, 4], batch_tokens=64, max_length=32)
        | arguments
    )
    with pytest.raises(ValueError, match=name):
        BatchShapes.fit(**values)

"""`target_tokens_per_pass`: the target tokens of one pass, counted by
hand over the pairs `make_batches` keeps."""

import numpy as np
import pytest

from keras_transformer.training import shape_sample
from keras_transformer.training import target_tokens_per_pass
from keras_transformer.training import text_pairs_from_lists
from tests.training.helpers import number_tokenizer

pytestmark = pytest.mark.tensorflow_only  # tf.data by design


def corpus(n, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 40, (n, 2))
    sources = [" ".join(["5"] * int(a)) for a, _ in lengths]
    targets = [" ".join(["6"] * int(b)) for _, b in lengths]
    return sources, targets, lengths


def test_counts_every_target_token_of_the_pairs_kept():
    sources, targets, lengths = corpus(500)
    pairs = text_pairs_from_lists(sources, targets)
    # EOS included; pairs with a side over max_length - 1 tokens dropped.
    kept = (lengths + 1 <= 30).all(axis=1)
    assert target_tokens_per_pass(pairs, number_tokenizer, max_length=30) == int(
        (lengths[kept, 1] + 1).sum()
    )
    # "truncate" keeps every pair, cut to max_length.
    expected = int(np.minimum(lengths[:, 1] + 1, 30).sum())
    assert target_tokens_per_pass(pairs, number_tokenizer, 30, "truncate") == expected


def test_a_large_corpus_is_estimated_from_its_sample(monkeypatch):
    monkeypatch.setattr(shape_sample, "SHAPE_SAMPLE", 250)  # every 4th of 1,000 pairs
    sources, targets, lengths = corpus(1000, seed=1)
    pairs = text_pairs_from_lists(sources, targets)
    estimate = target_tokens_per_pass(pairs, number_tokenizer, max_length=64)
    assert estimate == 4 * int((lengths[::4, 1] + 1).sum())
    assert estimate == pytest.approx(int((lengths[:, 1] + 1).sum()), rel=0.05)


def test_an_endless_dataset_has_no_pass():
    pairs = text_pairs_from_lists(["5 6"], ["6 5"]).repeat()
    with pytest.raises(ValueError, match="`pairs` is an endless dataset"):
        target_tokens_per_pass(pairs, number_tokenizer)

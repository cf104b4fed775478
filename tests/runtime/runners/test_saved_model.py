"""`SavedModelTranslator`'s requests within an export's limits (its
methods against `Translator`: tests/export/test_runners.py)."""

from keras_transformer_runtime.runners.saved_model import batches_within


def test_batches_keep_within_the_limits_and_a_line_over_them_goes_alone():
    batches = batches_within
    costs = [(3,), (4,), (2,), (9,), (1,), (1,), (1,)]
    # Sentences: the smaller of --batch_size and the export's max_batch_size.
    assert list(batches(costs, 300, max_batch_size=2)) == [(0, 2), (2, 4), (4, 6), (6, 7)]
    assert list(batches(costs, 3)) == [(0, 3), (3, 6), (6, 7)]
    # Tokens: each batch's sum within max_input_tokens; 9 > 8 goes alone.
    assert list(batches(costs, 300, 256, 8)) == [(0, 2), (2, 3), (3, 4), (4, 7)]
    # Every input of a request counts: here the second (targets).
    pairs = [(1, 5), (1, 5), (1, 1)]
    assert list(batches(pairs, 300, 256, 8)) == [(0, 1), (1, 3)]
    assert list(batches([], 4, 2, 8)) == []

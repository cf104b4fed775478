"""What every export that runs the search itself must show: a runtime
translator gives `Translator`'s translations and scores."""

import numpy as np
import tensorflow as tf


def assert_translates_as(translator, runtime, path, sources):
    """`runtime(path)` (a `keras_transformer_runtime` translator class)
    gives `translator`'s translations of `sources` and their scores
    (within 1e-5), in batches of 1 and of 7 (the order kept); returns the
    hypotheses of the last."""
    expected = translator.graph.serving_default(tf.constant(sources))
    for batch_size in (1, 7):
        results = runtime(path).translate_with_scores(sources, batch_size=batch_size)
        assert all(len(options) == 1 for options in results)
        hypotheses = [options[0] for options in results]
        assert [h.translation for h in hypotheses] == [
            t.decode() for t in expected["translation"].numpy()
        ]
        np.testing.assert_allclose(
            [h.score for h in hypotheses], expected["score"].numpy(), rtol=1e-5, atol=1e-5
        )
    return hypotheses

"""`aligned_outputs`: every strategy returns, from its own search, each
output token's log-probability and attention, equal to a teacher-forced
pass of the same model over the outputs it found."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_transformer as kt
from keras_transformer.decoding import BeamSearch
from keras_transformer.decoding import ConstrainedBeamSearch
from keras_transformer.decoding import GreedySearch
from keras_transformer.decoding import Sampling
from keras_transformer.decoding import SearchRequest
from keras_transformer.decoding.phrases import right_aligned
from keras_transformer.special_ids import BOS_ID
from keras_transformer.special_ids import EOS_ID
from keras_transformer.special_ids import PAD_ID

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

VOCAB, MAX_LENGTH, LAYER = 24, 9, 0
SOURCE = np.array([[5, 6, 7, 8, EOS_ID, 0], [9, 10, EOS_ID, 0, 0, 0], [11, 12, 13, 14, 15, EOS_ID]])
# EOS grows likelier step by step, so that outputs end at different steps.
EOS_BIAS = np.where(np.arange(VOCAB) == EOS_ID, 0.35, 0.0).astype("float32")


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(2)  # weights whose outputs end at different steps
    model = kt.Transformer(
        source_vocab_size=VOCAB,
        target_vocab_size=VOCAB,
        num_layers=2,
        d_model=16,
        num_heads=4,
        d_ff=32,
        dropout=0.0,
        max_length=16,
    )
    model((SOURCE, SOURCE))
    return model


def request(model, aligned=True, resize=True):
    encoder_output = model.encode(SOURCE, training=False)
    layer = LAYER if aligned else None

    def tokens_to_logits(ids, cache, index):
        logits, cache = model.decode_step(ids, cache, index, alignment_layer=layer)
        return logits[:, -1] + EOS_BIAS * tf.cast(index, tf.float32), cache

    cache = model.init_cache(
        encoder_output, SOURCE != PAD_ID, max_length=0 if resize else MAX_LENGTH, aligned=aligned
    )
    return SearchRequest(
        tokens_to_logits,
        cache,
        len(SOURCE),
        MAX_LENGTH,
        resize_cache=model.resize_cache if resize else None,
        alignment=(lambda per_hypothesis: per_hypothesis["alignment"][:, 0]) if aligned else None,
    )


def forced(model, sentence, ids):
    """Teacher forcing of `ids` (ending with EOS): each token's
    log-probability and layer `LAYER`'s head-averaged cross-attention."""
    target = np.concatenate([[BOS_ID], ids[:-1]])[None]
    logits, scores = model.logits_and_attention(SOURCE[sentence : sentence + 1], target)
    bias = EOS_BIAS * np.arange(len(ids))[:, None]
    log_probs = tf.nn.log_softmax(logits[0] + bias).numpy()[np.arange(len(ids)), ids]
    return log_probs, np.mean(scores[LAYER]["cross_attention"][0], axis=0)


STRATEGIES = {
    "beam, two results": BeamSearch(beam_size=4, num_results=2),
    "beam of 3": BeamSearch(beam_size=3),
    "constrained": ConstrainedBeamSearch(
        beam_size=4, constraints=right_aligned([[[7]], [[4, 5]], [[6]]])
    ),
    "greedy": GreedySearch(),
    "sampling": Sampling(top_k=5),
}


@pytest.mark.parametrize("resize", [True, False], ids=["growing cache", "whole cache"])
@pytest.mark.parametrize("name", list(STRATEGIES))
def test_aligned_outputs_are_the_teacher_forced_pass(model, name, resize):
    strategy = STRATEGIES[name]
    ids, scores = strategy.outputs(request(model, aligned=False, resize=resize), seed=3)
    found = strategy.aligned_outputs(request(model, resize=resize), seed=3)
    np.testing.assert_array_equal(found.ids, ids)
    np.testing.assert_allclose(found.scores, scores, rtol=1e-6)
    lengths = set()
    for sentence in range(len(SOURCE)):
        for result in range(found.ids.shape[1]):
            out = found.ids[sentence, result].numpy()
            length = int(np.sum(out != PAD_ID))
            lengths.add(length)
            log_probs, attention = forced(model, sentence, out[:length])
            token_scores = found.token_scores[sentence, result].numpy()
            attended = found.attention[sentence, result].numpy()
            np.testing.assert_allclose(token_scores[:length], log_probs, atol=2e-5)
            np.testing.assert_allclose(attended[:length], attention, atol=1e-5)
            # Nothing after EOS.
            assert not np.any(token_scores[length:]) and not np.any(attended[length:])
    assert len(lengths) > 1  # the outputs ended at different steps


@pytest.mark.parametrize("name", ["beam, two results", "greedy"])
def test_aligned_outputs_under_xla_equal_the_graphs(model, name):
    strategy = STRATEGIES[name]
    graph = tf.function(lambda: strategy.aligned_outputs(request(model)), autograph=False)
    xla = tf.function(lambda: strategy.aligned_outputs(request(model)), jit_compile=True)
    for expected, got in zip(graph(), xla(), strict=True):
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_aligned_outputs_need_a_request_that_aligns(model):
    for strategy in (BeamSearch(), GreedySearch()):
        with pytest.raises(ValueError, match="alignment"):
            strategy.aligned_outputs(request(model, aligned=False))

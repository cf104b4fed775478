import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import OutputControls
from keras_transformer.decoding import beam_search
from keras_transformer.decoding import greedy_search
from keras_transformer.decoding import sample
from keras_transformer.decoding.controls import NEG_INF
from keras_transformer.special_ids import EOS_ID
from tests.decoding.test_search import TABLE
from tests.decoding.test_search import VOCAB
from tests.decoding.test_search import log_softmax
from tests.decoding.test_search import markov
from tests.decoding.test_search import strip

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

EOS_BOOST = 2.0  # makes some sentences end at once, and one repeat itself


def eager_to_end(batch):
    """`markov(batch)` with EOS's logit raised by `EOS_BOOST`."""
    step, cache = markov(batch)

    def boosted(ids, cache, index):
        logits, cache = step(ids, cache, index)
        return logits + EOS_BOOST * tf.one_hot(EOS_ID, VOCAB), cache

    return boosted, cache


def repeats_an_ngram(tokens, n):
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


def controlled_greedy(sentence, controls, limit):
    """Greedy decoding of the Markov table with the controls applied by
    their definitions, in NumPy: `(tokens, log-probability)`."""
    tokens, previous, total = [], 2, 0.0
    while True:
        logits = TABLE[sentence % 3, previous].astype(np.float64)
        logits[EOS_ID] += EOS_BOOST
        theta = controls.repetition_penalty
        for token in set(tokens):
            logits[token] = logits[token] / theta if logits[token] > 0 else logits[token] * theta
        n = controls.no_repeat_ngram_size
        for token in range(VOCAB):
            if n and repeats_an_ngram(tokens + [token], n):
                logits[token] = -1e9
        if len(tokens) < controls.min_length and len(tokens) + 1 < limit:
            logits[EOS_ID] = -1e9
        log_probs = log_softmax(logits)
        token = EOS_ID if len(tokens) + 1 == limit else int(np.argmax(logits))
        tokens.append(token)
        total += log_probs[token]
        if token == EOS_ID:
            return tokens, total
        previous = token


CONTROLS = [
    OutputControls(min_length=6),
    OutputControls(no_repeat_ngram_size=2),
    OutputControls(no_repeat_ngram_size=3),
    OutputControls(repetition_penalty=3.0),
    OutputControls(min_length=4, no_repeat_ngram_size=2, repetition_penalty=1.5),
]


@pytest.mark.parametrize("controls", CONTROLS)
def test_greedy_follows_each_control_by_its_definition(controls):
    limits = [12, 12, 5]
    step, cache = eager_to_end(3)
    plain, _ = greedy_search(step, cache, 3, 12, length_limits=limits)
    ids, scores = greedy_search(step, cache, 3, 12, length_limits=limits, controls=controls)
    changed = 0
    for b in range(3):
        expected, log_prob = controlled_greedy(b, controls, limits[b])
        assert strip(ids[b].numpy()) == expected
        assert float(scores[b]) == pytest.approx(log_prob, rel=1e-5, abs=1e-5)
        changed += strip(plain[b].numpy()) != expected
    assert changed  # the uncontrolled output breaks the rule
    # Beam 1 and top-1 sampling are greedy, controls included.
    beam, _ = beam_search(
        step, cache, 3, 12, beam_size=1, alpha=0.0, length_limits=limits, controls=controls
    )
    np.testing.assert_array_equal(beam[:, 0].numpy(), ids.numpy())
    drawn, _ = sample(step, cache, 3, 12, seed=1, top_k=1, length_limits=limits, controls=controls)
    np.testing.assert_array_equal(drawn.numpy(), ids.numpy())


def test_every_beam_hypothesis_obeys_the_controls():
    step, cache = eager_to_end(3)
    controls = OutputControls(min_length=3, no_repeat_ngram_size=2)
    plain, _ = beam_search(step, cache, 3, 12, beam_size=3, num_results=3)
    ids, _ = beam_search(step, cache, 3, 12, beam_size=3, num_results=3, controls=controls)
    hypotheses = [strip(row) for row in ids.numpy().reshape(9, 12)]
    assert all(len(h) - 1 >= 3 and not repeats_an_ngram(h, 2) for h in hypotheses)
    plain = [strip(row) for row in plain.numpy().reshape(9, 12)]
    assert any(len(h) - 1 < 3 or repeats_an_ngram(h, 2) for h in plain)


def test_the_length_limit_wins_over_min_length():
    step, cache = eager_to_end(3)
    ids, _ = greedy_search(
        step, cache, 3, 8, length_limits=[2, 8, 8], controls=OutputControls(min_length=20)
    )
    assert strip(ids[0].numpy())[-1] == EOS_ID and len(strip(ids[0].numpy())) == 2
    assert all(len(strip(ids[b].numpy())) == 8 for b in (1, 2))


def test_controls_compile_with_xla():
    step, cache = eager_to_end(3)
    controls = OutputControls(min_length=2, no_repeat_ngram_size=3, repetition_penalty=1.2)
    run = lambda: beam_search(step, cache, 3, 10, beam_size=2, controls=controls)  # noqa: E731
    graph, xla = tf.function(run)(), tf.function(run, jit_compile=True)()
    np.testing.assert_array_equal(graph[0].numpy(), xla[0].numpy())


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(min_length=-1), "min_length"),
        (dict(no_repeat_ngram_size=1.5), "no_repeat_ngram_size"),
        (dict(repetition_penalty=0.5), "repetition_penalty"),
    ],
)
def test_bad_controls(kwargs, name):
    with pytest.raises(ValueError, match=f"Received: {name}="):
        OutputControls(**kwargs)


def test_vocabulary_masks_are_constants_where_the_vocabulary_size_is_static():
    """`never_chosen` and `only_eos_at_limit` hide the same tokens whether
    the vocabulary size is static (a constant mask, no ops per step) or
    only known when the graph runs (the mask built by ops)."""
    from keras_transformer.decoding.output_rules import never_chosen
    from keras_transformer.decoding.output_rules import only_eos_at_limit

    logits = tf.constant(np.random.default_rng(0).normal(size=(3, 7)), tf.float32)
    limits = tf.constant([2, 5, 9])

    def both(logits):
        return never_chosen(logits, (0, 2)), only_eos_at_limit(logits, 1, limits, 3)

    static = tf.function(both).get_concrete_function(tf.TensorSpec([3, 7], tf.float32))
    dynamic = tf.function(both).get_concrete_function(tf.TensorSpec([3, None], tf.float32))
    ops_of = lambda f: {op.type for op in f.graph.get_operations()}  # noqa: E731
    assert "Range" not in ops_of(static) and "Range" in ops_of(dynamic)  # the vocabulary
    hidden, at_limit = (t.numpy() for t in static(logits))
    for a, b in zip((hidden, at_limit), dynamic(logits), strict=True):
        np.testing.assert_array_equal(a, b.numpy())
    expected = logits.numpy().copy()
    expected[:, [0, 2]] = NEG_INF
    np.testing.assert_array_equal(hidden, expected)
    np.testing.assert_array_equal(at_limit[0, [0, 1, 2, 4, 5, 6]], NEG_INF)  # step 1 ends row 0
    np.testing.assert_array_equal(at_limit[1:], logits.numpy()[1:])

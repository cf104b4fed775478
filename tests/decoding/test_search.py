import itertools

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import beam_search
from keras_transformer.decoding import greedy_search
from keras_transformer.decoding import length_penalty
from keras_transformer.decoding import sample
from keras_transformer.special_ids import EOS_ID

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

VOCAB = 6
RNG = np.random.default_rng(0)
# A Markov "model": the next-token logits depend on the last token only, or
# (TABLE2) on the last two.
TABLE = (RNG.normal(size=(3, VOCAB, VOCAB)) * 2).astype("float32")
TABLE2 = (RNG.normal(size=(3, VOCAB, VOCAB, VOCAB)) * 2).astype("float32")
for table in (TABLE, TABLE2):
    table[..., 0] = -30.0  # never pad
    table[..., 2] = -30.0  # never BOS


def markov(batch, order=1, table=None):
    """`tokens_to_logits` for sentence b using TABLE[b % 3] (or TABLE2, or
    `table` in TABLE's layout).

    The sentence number is per-sentence state (one row per sentence, read
    by all the rows of its beams); the token before `ids` is per-hypothesis
    state: with `order=2` the logits depend on it, so a cache reordered
    wrongly changes the result."""

    def step(ids, cache, index):
        sentences = cache["per_sentence"]["sentence"]
        rows_per_sentence = tf.shape(ids)[0] // tf.shape(sentences)[0]
        sentence = tf.repeat(sentences, rows_per_sentence)
        previous = cache["per_hypothesis"]["previous"]
        if order == 1:
            logits = tf.gather_nd(
                TABLE if table is None else table, tf.stack([sentence, ids[:, 0]], axis=1)
            )
        else:
            logits = tf.gather_nd(TABLE2, tf.stack([sentence, previous, ids[:, 0]], axis=1))
        return logits, {**cache, "per_hypothesis": {"previous": ids[:, 0]}}

    cache = {
        "per_hypothesis": {"previous": tf.fill([batch], 2)},  # BOS before BOS
        "per_sentence": {"sentence": tf.range(batch) % 3},
    }
    return step, cache


def log_softmax(x):
    x = x - x.max()
    return x - np.log(np.exp(x).sum())


def sequence_log_prob(sentence, tokens, order=1, table=None):
    before, previous, total = 2, 2, 0.0
    for token in tokens:
        if order == 1:
            logits = (TABLE if table is None else table)[sentence % 3, previous]
        else:
            logits = TABLE2[sentence % 3, before, previous]
        total += log_softmax(logits.astype(np.float64))[token]
        before, previous = previous, token
    return total


def brute_force_best(sentence, limit, alpha, order=1, table=None):
    """The best length-penalized hypothesis over every sequence of output
    tokens (not PAD or BOS) that ends with EOS within `limit` tokens."""
    best = (-np.inf, None)
    for length in range(1, limit + 1):
        for prefix in itertools.product([1, 4, 5], repeat=length - 1):
            tokens = list(prefix) + [EOS_ID]
            score = sequence_log_prob(sentence, tokens, order, table)
            score /= ((5 + length) / 6) ** alpha
            best = max(best, (score, tokens), key=lambda x: x[0])
    return best


def strip(row):
    row = list(row)
    return row[: row.index(EOS_ID) + 1] if EOS_ID in row else row


def test_greedy_equals_a_numpy_rollout():
    step, cache = markov(3)
    ids, scores = greedy_search(step, cache, batch_size=3, max_length=10)
    for b in range(3):
        expected, previous = [], 2
        for position in range(10):
            token = int(np.argmax(TABLE[b % 3, previous]))
            if position == 9:  # the last allowed token must be EOS
                token = EOS_ID
            expected.append(token)
            if token == EOS_ID:
                break
            previous = token
        assert strip(ids[b].numpy()) == expected
        assert float(scores[b]) == pytest.approx(sequence_log_prob(b, expected), rel=1e-5)
        assert all(t == 0 for t in ids[b].numpy()[len(expected) :])


def test_no_search_chooses_padding_or_bos_and_scores_stay_the_models():
    """A model that prefers PAD and BOS to every other token: each search
    chooses among the others, and scores under the model's whole
    distribution (as scoring a given target does)."""
    table = TABLE.copy()
    table[..., 0] = table[..., 2] = 8.0  # PAD and BOS the most likely, by far
    step, cache = markov(3, table=table)
    ids, scores = greedy_search(step, cache, batch_size=3, max_length=6)
    for b in range(3):
        expected, previous = [], 2
        for position in range(6):
            allowed = np.where(np.isin(np.arange(VOCAB), [0, 2]), -np.inf, table[b % 3, previous])
            token = EOS_ID if position == 5 else int(np.argmax(allowed))
            expected.append(token)
            if token == EOS_ID:
                break
            previous = token
        assert strip(ids[b].numpy()) == expected
        expected_score = sequence_log_prob(b, expected, table=table)
        assert float(scores[b]) == pytest.approx(expected_score, rel=1e-5)
    ids, scores = beam_search(step, cache, batch_size=3, max_length=4, beam_size=6, alpha=0.6)
    for b in range(3):
        best_score, best = brute_force_best(b, 4, 0.6, table=table)
        assert strip(ids[b, 0].numpy()) == best
        assert float(scores[b, 0]) == pytest.approx(best_score, rel=1e-4)
    ids, scores = sample(step, cache, batch_size=3, max_length=6, seed=1, temperature=3.0)
    for b in range(3):
        tokens = strip(ids[b].numpy())
        assert not {0, 2} & set(tokens)
        assert float(scores[b]) == pytest.approx(sequence_log_prob(b, tokens, table=table), 1e-5)


def test_beam_one_equals_greedy():
    step, cache = markov(3)
    greedy, _ = greedy_search(step, cache, batch_size=3, max_length=12, length_limits=[12, 4, 7])
    beam, _ = beam_search(
        step, cache, batch_size=3, max_length=12, beam_size=1, alpha=0.0, length_limits=[12, 4, 7]
    )
    np.testing.assert_array_equal(beam[:, 0].numpy(), greedy.numpy())


@pytest.mark.parametrize("alpha, order", [(0.0, 1), (0.6, 1), (1.0, 1), (0.6, 2)])
def test_wide_beam_finds_the_brute_force_optimum(alpha, order):
    # Tokens 0 and 2 are (nearly) impossible, so 3 real choices per step: a
    # beam of 3^4 keeps every prefix of length <= 4 and is exact. With
    # order 2 the per-hypothesis cache must follow every reordering.
    step, cache = markov(3, order)
    limits = [5, 3, 4]
    ids, scores = beam_search(
        step, cache, batch_size=3, max_length=5, beam_size=81, alpha=alpha, length_limits=limits
    )
    for b in range(3):
        best_score, best_tokens = brute_force_best(b, limits[b], alpha, order)
        assert strip(ids[b, 0].numpy()) == best_tokens
        assert float(scores[b, 0]) == pytest.approx(best_score, rel=1e-4)


def test_beam_four_scores_at_least_greedy():
    step, cache = markov(3)
    greedy, _ = greedy_search(step, cache, batch_size=3, max_length=8)
    ids, scores = beam_search(
        step, cache, batch_size=3, max_length=8, beam_size=4, alpha=0.6, num_results=4
    )
    for b in range(3):
        tokens = strip(greedy[b].numpy())
        greedy_score = sequence_log_prob(b, tokens) / length_penalty(len(tokens), 0.6)
        assert float(scores[b, 0]) >= greedy_score - 1e-5
        assert np.all(np.diff(scores[b].numpy()) <= 1e-6)  # best first
        for k in range(4):  # every returned score is its hypothesis' score
            hyp = strip(ids[b, k].numpy())
            expected = sequence_log_prob(b, hyp) / ((5 + len(hyp)) / 6) ** 0.6
            assert float(scores[b, k]) == pytest.approx(expected, rel=1e-4)


def test_limits_force_eos():
    step, cache = markov(3)
    ids, _ = beam_search(
        step, cache, batch_size=3, max_length=6, beam_size=3, length_limits=[1, 2, 6]
    )
    lengths = [len(strip(ids[b, 0].numpy())) for b in range(3)]
    assert lengths[0] == 1 and lengths[1] <= 2 and lengths[2] <= 6
    assert all(strip(ids[b, 0].numpy())[-1] == EOS_ID for b in range(3))


def test_traces_once_and_compiles_with_xla():
    traces = []

    def run(batch):
        traces.append(1)
        step, cache = markov(batch)
        return beam_search(step, cache, batch_size=batch, max_length=7, beam_size=3)

    graph = tf.function(run, input_signature=[tf.TensorSpec([], tf.int32)])
    xla = tf.function(run, jit_compile=True)
    for batch in (2, 5):
        ids, scores = graph(tf.constant(batch))
        xla_ids, xla_scores = xla(batch)
        np.testing.assert_array_equal(ids.numpy(), xla_ids.numpy())
        np.testing.assert_allclose(scores.numpy(), xla_scores.numpy(), rtol=1e-5)
    assert graph.experimental_get_tracing_count() == 1
    greedy = tf.function(
        lambda: greedy_search(*markov(2), batch_size=2, max_length=7), jit_compile=True
    )
    assert greedy()[0].shape == (2, 7)


def test_bad_num_results():
    with pytest.raises(ValueError, match="Received: num_results=5"):
        beam_search(*markov(1), batch_size=1, max_length=5, beam_size=4, num_results=5)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_static_batch_under_xla(search):
    """Under XLA with a static batch (tf.shape of a fixed-size input) the
    token column must stay (n, 1) and the loop state keep its shapes."""
    fixed = tf.zeros([3, 9], tf.int32)

    @tf.function(jit_compile=True)
    def run(source):
        batch = tf.shape(source)[0]
        step, cache = markov(3)

        def uses_shapes(ids, cache, index):
            # Broadcasting the ids against a fixed-width buffer fails if their
            # shape is not exactly (n, 1).
            buffer = tf.where(
                tf.equal(tf.range(9), index)[None], ids, tf.zeros([tf.shape(ids)[0], 9], tf.int32)
            )
            logits, cache = step(ids, cache, index)
            return logits + 0.0 * tf.cast(tf.reduce_sum(buffer), tf.float32), cache

        if search == "greedy":
            return greedy_search(uses_shapes, cache, batch_size=batch, max_length=9)[0]
        return beam_search(uses_shapes, cache, batch_size=batch, max_length=9, beam_size=2)[0][:, 0]

    assert run(fixed).shape == (3, 9)


@pytest.mark.parametrize(
    "cache",
    [
        {"previous": tf.zeros([2], tf.int32)},
        {"per_hypothesis": {}},
        (tf.zeros([2]),),
    ],
)
def test_beam_cache_without_its_two_parts_is_refused(cache):
    step, _ = markov(2)
    with pytest.raises(ValueError, match="per_hypothesis.*per_sentence"):
        beam_search(step, cache, batch_size=2, max_length=5)


@pytest.mark.parametrize("vocab", [97, 120, 12, 5])
def test_best_extensions_equal_a_full_top_k(vocab):
    """The chunked search for the best (beam, token) extensions gives what
    `top_k` over every flattened candidate gives, ties and their order
    included: integer logits tie often; 97 is prime (a padded last chunk),
    120 splits evenly, 12 and 5 have few chunks (5: fewer than asked for)."""
    from keras_transformer.decoding.top_k import Candidates

    rng = np.random.default_rng(vocab)
    batch, beams, count = 5, 4, 8
    logits = rng.integers(-3, 4, (batch, beams, vocab)).astype("float32")
    offsets = rng.integers(-2, 1, (batch, beams)).astype("float32")
    offsets[0, 1:] = -1e9  # empty beams, as at the first step
    values, indices = Candidates(tf.constant(logits)).best(tf.constant(offsets), count)
    flat = (offsets[:, :, None] + logits).reshape(batch, -1)
    # NumPy reference: a stable sort on -value keeps ties in index order.
    expected = np.argsort(-flat, axis=-1, kind="stable")[:, :count]
    np.testing.assert_array_equal(indices.numpy(), expected)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(flat, expected, -1))


@pytest.mark.parametrize("vocab", [97, 120, 31, 5])
def test_best_extensions_under_a_one_token_rule(vocab):
    """Where a sentence may only emit one token (EOS at its limit, a forced
    prefix token, or both: then nothing unless they agree), the chunked
    search equals a full top-k over logits masked in full, as NumPy masks
    them. 31 puts one real token in the padded last chunk; the rule's
    tokens include the first and the last one."""
    from keras_transformer.decoding.controls import NEG_INF
    from keras_transformer.decoding.output_rules import only_token
    from keras_transformer.decoding.top_k import best_extensions

    rng = np.random.default_rng(vocab)
    batch, beams, count, step, eos = 6, 4, 8, 3, 1
    logits = rng.integers(-3, 4, (batch, beams, vocab)).astype("float32")
    alive = rng.integers(-2, 1, (batch, beams)).astype("float32")
    limits = np.array([4, 9, 4, 4, 4, 9], "int32")  # step + 1 == 4: at the limit
    forced = np.array([False, True, True, True, False, False])
    forced_token = np.array([0, vocab - 1, eos, 0, 0, 0], "int32")
    only = only_token(
        tf.constant(logits), step, limits, eos, tf.constant(forced), tf.constant(forced_token)
    )
    log_probs, indices = best_extensions(tf.constant(logits), tf.constant(alive), count, only)

    shifted = logits - logits.max(-1, keepdims=True)
    normalizer = logits.max(-1) + np.log(np.exp(shifted).sum(-1))
    masked = logits.copy()
    for b in range(batch):
        allowed = {eos} if limits[b] == step + 1 else set(range(vocab))
        if forced[b]:
            allowed &= {forced_token[b]}
        masked[b, :, [v for v in range(vocab) if v not in allowed]] = NEG_INF
    flat = ((alive - normalizer)[:, :, None] + masked).reshape(batch, -1)
    expected = np.argsort(-flat, axis=-1, kind="stable")[:, :count]
    np.testing.assert_array_equal(indices.numpy(), expected)
    np.testing.assert_allclose(log_probs.numpy(), np.take_along_axis(flat, expected, -1), 1e-6)


def test_log_normalizer_from_the_chunk_maxima_is_a_log_sum_exp():
    """The normalizer beam search takes from the chunk maxima equals
    `log Σ exp` in float64, and the one greedy search computes on its own
    bit for bit (a padded last chunk: 97 tokens)."""
    from keras_transformer.decoding.top_k import Candidates
    from keras_transformer.decoding.top_k import log_normalizer

    logits = RNG.normal(size=(3, 4, 97)).astype("float32") * 20
    ours = Candidates(tf.constant(logits)).log_normalizer().numpy()
    wide = logits.astype(np.float64)
    top = wide.max(-1, keepdims=True)
    np.testing.assert_allclose(ours, top[..., 0] + np.log(np.exp(wide - top).sum(-1)), 1e-6)
    np.testing.assert_array_equal(ours, log_normalizer(tf.constant(logits)).numpy())


def test_sampling_top_k_one_is_greedy():
    step, cache = markov(3)
    limits = dict(batch_size=3, max_length=12, length_limits=[12, 4, 7])
    greedy, greedy_scores = greedy_search(step, cache, **limits)
    for seed in (0, 1):
        ids, scores = sample(step, cache, seed=seed, temperature=0.7, top_k=1, **limits)
        np.testing.assert_array_equal(ids.numpy(), greedy.numpy())
        np.testing.assert_array_equal(scores.numpy(), greedy_scores.numpy())


def filtered_probs(logits, temperature, top_k, top_p):
    """The sampling distribution by its definition, in NumPy: softmax of
    the tempered logits over the top-k tokens, then over the smallest
    most-likely set whose mass reaches top-p, renormalized."""
    probs = np.exp(log_softmax(logits.astype(np.float64) / temperature))
    order = np.argsort(-probs, kind="stable")
    keep = np.zeros(len(probs), bool)
    mass = 0.0
    for rank, token in enumerate(order):
        if (top_k and rank >= top_k) or mass >= top_p:
            break
        keep[token] = True
        mass += probs[token]
    kept = np.where(keep, probs, 0.0)
    return kept / kept.sum()


@pytest.mark.parametrize(
    "temperature, top_k, top_p",
    [(1.0, 0, 1.0), (0.5, 0, 1.0), (2.0, 3, 1.0), (1.0, 0, 0.7), (1.5, 4, 0.8)],
)
def test_sampled_pairs_follow_the_filtered_distribution(temperature, top_k, top_p):
    rows = 20_000
    step, cache = markov(rows)
    cache["per_sentence"]["sentence"] = tf.zeros([rows], tf.int32)  # all sentence 0
    ids, scores = sample(
        step, cache, rows, max_length=3, seed=11, temperature=temperature, top_k=top_k, top_p=top_p
    )
    ids = ids.numpy()
    # Expected probability of each first token, and of each (first, second).
    first = filtered_probs(TABLE[0, 2], temperature, top_k, top_p)
    np.testing.assert_allclose(np.bincount(ids[:, 0], minlength=VOCAB) / rows, first, atol=0.015)
    for token in np.flatnonzero(first > 0.1):
        if token == EOS_ID:
            continue
        rows_with = ids[:, 0] == token
        second = filtered_probs(TABLE[0, token], temperature, top_k, top_p)
        observed = np.bincount(ids[rows_with, 1], minlength=VOCAB) / rows_with.sum()
        np.testing.assert_allclose(observed, second, atol=4 / np.sqrt(rows_with.sum()))
    # The scores are the model's own log-probabilities of the drawn tokens.
    for row in range(5):
        tokens = strip(ids[row])
        assert float(scores[row]) == pytest.approx(sequence_log_prob(0, tokens), rel=1e-5, abs=1e-5)


def test_sampling_is_stateless_and_compiles():
    step, cache = markov(64)
    run = tf.function(lambda seed: sample(step, cache, 64, 8, seed=seed, temperature=1.5)[0])
    first, again, other = run(tf.constant(3)), run(tf.constant(3)), run(tf.constant(4))
    np.testing.assert_array_equal(first.numpy(), again.numpy())
    assert not np.array_equal(first.numpy(), other.numpy())
    assert run.experimental_get_tracing_count() == 1
    # XLA's random numbers are its own: the same seed repeats its draws.
    for settings in (dict(temperature=1.5), dict(top_k=3, top_p=0.9)):
        xla = tf.function(lambda: sample(step, cache, 64, 8, seed=3, **settings), jit_compile=True)  # noqa: B023
        ids = xla()[0].numpy()
        np.testing.assert_array_equal(xla()[0].numpy(), ids)
        assert ((ids == EOS_ID).sum(axis=1) <= 1).all() and len(np.unique(ids[:, 0])) > 1


def counting_rows(step):
    """`step` that also counts the rows it decodes, in a variable."""
    rows = tf.Variable(0)

    def counted(ids, cache, index):
        rows.assign_add(tf.shape(ids)[0])
        return step(ids, cache, index)

    return counted, rows


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_finished_sentences_leave_the_loop_outside_xla(search):
    """In a graph the rows of a sentence that is done leave the loop: the
    model decodes fewer rows than under XLA (a fixed batch), for the same
    outputs; a greedy sentence is decoded once per output token."""
    batch, max_length, limits = 5, 9, [1, 9, 3, 6, 2]

    def run(step, cache):
        if search == "greedy":
            return greedy_search(step, cache, batch, max_length, length_limits=limits)
        return beam_search(step, cache, batch, max_length, beam_size=3, length_limits=limits)

    outputs, rows = {}, {}
    for way, jit in (("graph", False), ("xla", True)):
        step, cache = markov(batch, order=2)
        step, rows[way] = counting_rows(step)
        outputs[way] = tf.function(lambda: run(step, cache), jit_compile=jit)()  # noqa: B023
    np.testing.assert_array_equal(outputs["graph"][0].numpy(), outputs["xla"][0].numpy())
    np.testing.assert_allclose(outputs["graph"][1].numpy(), outputs["xla"][1].numpy(), rtol=1e-5)
    assert int(rows["graph"].numpy()) < int(rows["xla"].numpy())
    if search == "greedy":
        lengths = [len(strip(ids)) for ids in outputs["graph"][0].numpy()]
        assert int(rows["graph"].numpy()) == sum(lengths)
        assert int(rows["xla"].numpy()) == batch * max(lengths)


def test_a_sampled_sentence_draws_the_same_whichever_others_remain():
    """Sentence 0 ends at once in one run and decodes on in the other: the
    other sentences, whose rows move when it leaves, draw the same."""
    step, cache = markov(4)
    short = sample(step, cache, 4, 8, seed=5, temperature=3.0, length_limits=[1, 8, 8, 8])[0]
    step, cache = markov(4)
    long = sample(step, cache, 4, 8, seed=5, temperature=3.0)[0]
    assert len(strip(short[0].numpy())) == 1 < len(strip(long[0].numpy()))
    np.testing.assert_array_equal(short[1:].numpy(), long[1:].numpy())


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(temperature=0.0), "temperature"),
        (dict(top_k=-1), "top_k"),
        (dict(top_k=2.5), "top_k"),
        (dict(top_p=0.0), "top_p"),
        (dict(top_p=1.5), "top_p"),
    ],
)
def test_bad_sampling_settings(kwargs, name):
    with pytest.raises(ValueError, match=f"Received: {name}="):
        sample(*markov(1), batch_size=1, max_length=5, seed=0, **kwargs)


def history_markov(batch, max_length, table=TABLE2):
    """The order-2 Markov model of `markov(batch, order=2)`, but reading the
    token before `ids` from a buffer of every position so far, its
    per-hypothesis cache `(rows, 1, positions, 1)` written at `index` like
    a Transformer's keys: a cache that is not kept, grown or reordered
    right changes the outputs. Returns `(step, cache, resize, positions)`,
    `positions` a variable counting the buffer positions the steps saw."""
    positions = tf.Variable(0)

    def step(ids, cache, index):
        sentences = cache["per_sentence"]["sentence"]
        sentence = tf.repeat(sentences, tf.shape(ids)[0] // tf.shape(sentences)[0])
        buffer = cache["per_hypothesis"]["tokens"]
        positions.assign_add(tf.shape(buffer)[2])
        before = tf.gather(buffer[:, 0, :, 0], tf.maximum(index - 1, 0), axis=1)
        previous = tf.where(index > 0, before, 2)  # BOS before BOS
        logits = tf.gather_nd(table, tf.stack([sentence, previous, ids[:, 0]], axis=1))
        here = tf.equal(tf.range(tf.shape(buffer)[2]), index)[None, None, :, None]
        buffer = tf.where(here, ids[:, :, None, None], buffer)
        return logits, {**cache, "per_hypothesis": {"tokens": buffer}}

    def resize(per_hypothesis, length):
        kept = per_hypothesis["tokens"][:, :, :length]
        missing = tf.maximum(length - tf.shape(kept)[2], 0)
        zeros = tf.zeros([tf.shape(kept)[0], 1, missing, 1], tf.int32)
        return {"tokens": tf.concat([kept, zeros], axis=2)}

    cache = {
        "per_hypothesis": {"tokens": tf.zeros([batch, 1, max_length, 1], tf.int32)},
        "per_sentence": {"sentence": tf.range(batch) % 3},
    }
    return step, cache, resize, positions


SEARCHES = {
    "greedy": lambda *args, **kw: greedy_search(*args, **kw),
    "beam": lambda *args, **kw: beam_search(*args, beam_size=3, num_results=2, **kw),
    "sample": lambda *args, **kw: sample(*args, seed=3, **kw),
}


# TABLE2 without EOS but at the limit: every hypothesis runs to it.
ENDLESS = TABLE2.copy()
ENDLESS[..., EOS_ID] = -30.0


def positions_seen(ends, steps):
    """The cache positions `steps` steps attend to, segments ending at
    `ends`: each step sees the cache of the segment it is in."""
    return sum(next(end for end in ends if end > step) for step in range(steps))


@pytest.mark.parametrize("search", sorted(SEARCHES))
def test_a_cache_grown_in_segments_changes_nothing(search):
    """With `resize_cache` the searches grow the cache as the steps go on:
    the same ids and scores as with the full cache from the start, eagerly,
    in a graph and under XLA, and each step saw a cache only as long as its
    segment: grown by a quarter or at least 8 positions (here 8, 16, 20),
    or under XLA in 4 equal segments (5, 10, 15, 20)."""
    batch, max_length = 4, 20
    run = SEARCHES[search]
    step, cache, _, full_positions = history_markov(batch, max_length, ENDLESS)
    ids, scores = run(step, cache, batch, max_length)
    assert full_positions.numpy() == max_length * max_length  # every step ran
    step, cache, resize, positions = history_markov(batch, max_length, ENDLESS)
    grown_ids, grown_scores = run(step, cache, batch, max_length, resize_cache=resize)
    np.testing.assert_array_equal(grown_ids.numpy(), ids.numpy())
    np.testing.assert_allclose(grown_scores.numpy(), scores.numpy(), rtol=1e-6)
    assert positions.numpy() == positions_seen([8, 16, 20], max_length)

    # In a graph and under XLA the buffer's size is a tensor and a constant.
    for jit, ends in ((False, [8, 16, 20]), (True, [5, 10, 15, 20])):
        step, cache, resize, positions = history_markov(batch, 1, ENDLESS)  # grown from one

        def traced(size):
            return run(step, cache, batch, size, resize_cache=resize)  # noqa: B023

        size = max_length if jit else tf.constant(max_length)
        traced_ids, _ = tf.function(traced, jit_compile=jit)(size)
        if not (jit and search == "sample"):  # XLA draws other random numbers
            np.testing.assert_array_equal(traced_ids.numpy(), ids.numpy())
        assert positions.numpy() == positions_seen(ends, max_length)


def test_growing_a_cache_needs_its_two_parts():
    step, cache, resize, _ = history_markov(2, 5)
    with pytest.raises(ValueError, match="resize_cache.*per_hypothesis.*per_sentence"):
        greedy_search(step, cache["per_hypothesis"], 2, 5, resize_cache=resize)


@pytest.mark.parametrize("search", sorted(SEARCHES))
def test_a_cache_of_numpy_arrays_is_searched_like_tensors(search):
    """An eager caller's cache may hold NumPy arrays (a source mask built
    with NumPy): the same outputs as the same cache in tensors."""
    batch, max_length = 4, 12
    run = SEARCHES[search]
    step, cache, resize, _ = history_markov(batch, max_length)
    ids, scores = run(step, cache, batch, max_length, resize_cache=resize)
    arrays = tf.nest.map_structure(lambda t: t.numpy(), cache)
    for resize_cache in (None, resize):
        array_ids, array_scores = run(step, arrays, batch, max_length, resize_cache=resize_cache)
        np.testing.assert_array_equal(array_ids.numpy(), ids.numpy())
        np.testing.assert_allclose(array_scores.numpy(), scores.numpy(), rtol=1e-6)

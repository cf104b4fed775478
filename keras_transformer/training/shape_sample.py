"""The sample of a corpus that `make_batches`' static shapes are fitted
to (`fit_batch_shapes`): about `SHAPE_SAMPLE` pairs drawn evenly from the
whole corpus, tokenized and filtered as `make_batches` does them, and
kept for the few datasets of a run (every replica's batches, and
`train`'s record of the shapes, share one).

Example:

>>> lengths, how = sampled_lengths(pairs, tokenizer, max_length=128, long_pairs="drop")
>>> how
"one pair in every 45 of the corpus's 4,508,785"
"""

import collections

import numpy as np
import tensorflow as tf

from keras_transformer.training import token_pairs

SHAPE_SAMPLE = 100_000

# The last few samples' lengths, by the identity of their pairs and
# tokenizer (kept alive with them): every replica's `make_batches` of a run,
# and `train`'s record of the shapes, fit on one sample, tokenized once.
_SAMPLES = collections.OrderedDict()


def sampled_lengths(pairs, tokenizer, max_length, long_pairs):
    """`(pairs, 2)` source and target lengths, EOS and BOS included, of the
    pairs of a sample that `make_batches` keeps (read-only), and how the
    sample was drawn (`_shape_sample`)."""
    lengths, how, _ = _sample(pairs, tokenizer, max_length, long_pairs)
    return lengths, how


def target_tokens_per_pass(pairs, tokenizer, max_length=256, long_pairs="drop"):
    """The target tokens (EOS included) of one pass over the pairs that
    `make_batches` keeps of `pairs`: all of them counted, or estimated from
    about `SHAPE_SAMPLE` pairs drawn evenly (the sample static shapes are
    fitted to, tokenized once for both). What `DropoutByPasses` needs:

    >>> tokens = target_tokens_per_pass(pairs, tokenizer, max_length=128)
    >>> DropoutByPasses(updates_per_pass=tokens / 25_000)

    Raises:
        ValueError: `pairs` is endless (a pass of it has no end).
    """
    if int(pairs.cardinality()) == int(tf.data.INFINITE_CARDINALITY):
        raise ValueError(
            "`pairs` is an endless dataset: a pass over it has no end. Pass the corpus's pairs "
            f"before `repeat()`. Received: pairs={pairs!r}"
        )
    lengths, _, stride = _sample(pairs, tokenizer, max_length, long_pairs)
    return int(lengths[:, 1].sum()) * stride


def _sample(pairs, tokenizer, max_length, long_pairs):
    """`_lengths_of_sample`, kept for the few datasets of a run."""
    key = (id(pairs), id(tokenizer), max_length, long_pairs)
    if key not in _SAMPLES:
        sample = _lengths_of_sample(pairs, tokenizer, max_length, long_pairs)
        _SAMPLES[key] = (pairs, tokenizer, sample)
        while len(_SAMPLES) > 4:
            _SAMPLES.popitem(last=False)
    return _SAMPLES[key][2]


def _shape_sample(pairs):
    """At most about `SHAPE_SAMPLE` pairs drawn evenly from the whole of
    `pairs` (every k-th: a corpus of concatenated subcorpora, as WMT14's,
    is sampled in each of them, not in its first only), and how: a
    dataset of unknown size is counted in one pass over its text; an
    endless one gives its first pairs. Also the pairs each drawn one
    stands for (an endless dataset's pass: the sample)."""
    count = int(pairs.cardinality())
    if count == int(tf.data.INFINITE_CARDINALITY):
        how = f"the first {SHAPE_SAMPLE:,} pairs of an endless dataset"
        return pairs.take(SHAPE_SAMPLE), how, 1
    if count == int(tf.data.UNKNOWN_CARDINALITY):
        count = int(pairs.reduce(np.int64(0), lambda total, _: total + 1))
    stride = -(-count // SHAPE_SAMPLE)  # rounded up
    if stride <= 1:
        return pairs, f"all {count:,} pairs of the corpus", 1
    return pairs.shard(stride, 0), f"one pair in every {stride} of the corpus's {count:,}", stride


def _lengths_of_sample(pairs, tokenizer, max_length, long_pairs):
    keep = token_pairs.keep_pair(max_length, long_pairs)
    drawn, how, stride = _shape_sample(pairs)
    sample = token_pairs.tokenized(drawn, tokenizer, None)

    def framed_lengths(source, target, *_):  # with EOS and BOS; truncated to max_length
        return tf.minimum(tf.stack([tf.size(source), tf.size(target)]) + 1, max_length)

    kept = sample.filter(lambda *pair: keep(*pair)["kept"]).map(framed_lengths)
    rows = list(kept.batch(65536).as_numpy_iterator())
    lengths = np.concatenate(rows) if rows else np.zeros([0, 2], np.int32)
    lengths.setflags(write=False)
    return lengths, how, stride

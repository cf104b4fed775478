"""Several parallel corpora as one, for `make_batches`: each shuffled and
repeated on its own, each pair drawn from corpus `i` with probability
`weights[i]`, one pass being a given number of draws; and sources marked
with a tag (a target language's, `multilingual`; back-translation's
`<BT>`, Caswell et al., 2019)."""

import tensorflow as tf

from keras_transformer import _backend
from keras_transformer_runtime import validation


@_backend.tensorflow_only("training.prefixed_sources", "tf.data")
def prefixed_sources(pairs, prefix):
    """`pairs` (a dataset of `(source, target)` strings) with `prefix` and
    a space before each source.

    Example:

    >>> prefixed_sources(text_pairs_from_files("bt.en", "bt.de"), "<BT>")
    """
    if not isinstance(prefix, str) or not prefix.strip() or prefix != prefix.strip():
        raise ValueError(
            "`prefix` must be a non-empty string without surrounding spaces. "
            f"Received: prefix={prefix!r}"
        )
    tag = tf.constant(prefix)
    return pairs.map(
        lambda source, target: (tf.strings.join([tag, source], separator=" "), target),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


@_backend.tensorflow_only("training.mix_pairs", "tf.data")
def mix_pairs(corpora, weights, pass_size, seed=None, shuffle_buffer=100_000):
    """One dataset of the pairs of several corpora, drawn by `weights`.

    Args:
        corpora: `{name: pairs}`, each a dataset of `(source, target)`
            strings (`text_pairs_from_files`).
        weights: `{name: probability}` for the same names (summing to 1).
        pass_size: draws in one pass of the mixture (the sum of the
            corpora's sizes makes `make_batches`' passes mean what they
            mean for one corpus).
        seed: the seed of the draws and of each corpus's shuffle; `None`
            draws afresh in every process (what a resumed run wants).
        shuffle_buffer: pairs held by each corpus's shuffle buffer (0: no
            shuffle).

    Example:

    >>> pairs = mix_pairs({"real": real, "synthetic": synthetic},
    ...                   {"real": 0.5, "synthetic": 0.5}, pass_size=29000)
    """
    if not isinstance(corpora, dict) or not corpora:
        raise ValueError(
            f"`corpora` must be a dict of at least one corpus. Received: corpora={corpora!r}"
        )
    if not isinstance(weights, dict) or set(weights) != set(corpora):
        raise ValueError(
            "`weights` must give each corpus's probability, by the same names. "
            f"Received: corpora {sorted(corpora)}, weights={weights!r}"
        )
    if any(not 0 <= p <= 1 for p in weights.values()) or abs(sum(weights.values()) - 1) > 1e-6:
        raise ValueError(f"`weights` must be probabilities summing to 1. Received: {weights!r}")
    validation.check_positive_int(pass_size=pass_size)
    validation.check_non_negative_int(shuffle_buffer=shuffle_buffer)
    names = list(corpora)
    streams = []
    for index, name in enumerate(names):
        pairs = corpora[name]
        if shuffle_buffer:
            pair_seed = None if seed is None else seed + index
            pairs = pairs.shuffle(shuffle_buffer, seed=pair_seed, reshuffle_each_iteration=True)
        streams.append(pairs.repeat())
    return tf.data.Dataset.sample_from_datasets(
        streams, weights=[weights[name] for name in names], seed=seed
    ).take(pass_size)

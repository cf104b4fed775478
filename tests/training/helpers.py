"""Simple in-graph tokenizers and synthetic corpora for the training tests."""

import numpy as np
import tensorflow as tf


def number_tokenizer(strings):
    """ "5 17 3" -> [5, 17, 3]: the ids are written in the text."""
    return tf.strings.to_number(tf.strings.split(strings), tf.int32)


def byte_tokenizer(strings):
    """Each UTF-8 byte b -> id 4 + b (ids 0-3 are special)."""
    return (
        tf.cast(tf.strings.unicode_decode(strings, "UTF-8", errors="replace"), tf.int32) % 256 + 4
    )


def reversal_corpus(n, vocab=20, min_len=3, max_len=9, seed=0):
    """Sentences of random ids in [4, vocab) and their reversals, as text."""
    rng = np.random.default_rng(seed)
    sources, targets = [], []
    for _ in range(n):
        ids = rng.integers(4, vocab, rng.integers(min_len, max_len + 1))
        sources.append(" ".join(map(str, ids)))
        targets.append(" ".join(map(str, ids[::-1])))
    return sources, targets

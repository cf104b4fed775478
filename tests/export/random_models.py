"""The untrained models and the corpus of the exports' tests."""

import numpy as np

from keras_transformer import Transformer

WORDS = "dog cat runs the a house green blue walks sleeps bird tree".split()


def word_sentences(count=400, seed=0):
    """`count` sentences of 2 to 7 of `WORDS`."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, rng.integers(2, 8))) for _ in range(count)]


def random_model(**options):
    """A random 2-layer `Transformer` of width 32 over 320 ids, any
    constructor argument overridden. Its vocabulary is larger than the
    words tokenizer's (300): an export must drop, or never emit, the ids
    a translator never emits."""
    sizes = dict(vocab_size=320, num_layers=2, d_model=32, num_heads=4, d_ff=64, max_length=64)
    return Transformer(**{**sizes, "dropout": 0.0, **options})

"""The smallest models, for the tests of plumbing (shapes, caches, files,
errors): they check what the code does, not what a model learns."""

from keras_transformer import Transformer

# One layer of width 16 on each side, two heads, no dropout.
MICRO = dict(num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout=0.0, max_length=32)
MICRO_VOCAB = 20


def micro_model(**overrides):
    """A `Transformer` of `MICRO` size over `MICRO_VOCAB` ids, any
    constructor argument overridden (e.g. the tokenizer's `vocab_size`)."""
    return Transformer(**{"vocab_size": MICRO_VOCAB, **MICRO, **overrides})

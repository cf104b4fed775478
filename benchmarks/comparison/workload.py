"""The work every implementation does, and the synthetic data for it.

The model: a post-norm Transformer with ReLU feed-forward layers,
sinusoidal positions, dropout 0.1 and one embedding shared by the source,
the target and the output projection, in three sizes (`CONFIGS`).

* Training: one optimizer step on `TRAIN_BATCH` sentences of `SOURCE_LEN`
  source and `TARGET_LEN` target tokens, Adam, label smoothing 0.1.
* Decoding: `DECODE_BATCH` sentences of `DECODE_SOURCE_LEN` tokens,
  exactly `DECODE_STEPS` steps each (EOS is forbidden before the last
  step), greedy and beam `BEAM`; and one sentence of `SINGLE_LENGTH`
  tokens decoded to exactly `SINGLE_LENGTH` tokens with beam `BEAM` (the
  latency a server sees for one request). `DECODE_SHAPES` has each task's
  shape.

Token ids come from `spec["ids"]` (see `special_ids`), so that the peers'
workers need not import keras_transformer.
"""

CONFIGS = {
    "tiny": dict(vocab=8000, d_model=256, layers=3, heads=4, d_ff=1024),
    "small": dict(vocab=16000, d_model=512, layers=3, heads=8, d_ff=2048),
    "base": dict(vocab=37000, d_model=512, layers=6, heads=8, d_ff=2048),
}
TRAIN_BATCH, SOURCE_LEN, TARGET_LEN = 128, 32, 32
DECODE_BATCH, DECODE_SOURCE_LEN, DECODE_STEPS = 64, 32, 40
BEAM = 4
SINGLE_LENGTH = 20
# Per decoding task: sentences, source tokens, generated tokens, beam.
DECODE_SHAPES = {
    "greedy": dict(batch=DECODE_BATCH, source_len=DECODE_SOURCE_LEN, steps=DECODE_STEPS, beam=1),
    "beam4": dict(batch=DECODE_BATCH, source_len=DECODE_SOURCE_LEN, steps=DECODE_STEPS, beam=BEAM),
    "beam4_single": dict(batch=1, source_len=SINGLE_LENGTH, steps=SINGLE_LENGTH, beam=BEAM),
}
DROPOUT, LABEL_SMOOTHING = 0.1, 0.1
# Logit that forbids a token (finite, so that sums stay finite).
FORBIDDEN = -1.0e9


def special_ids():
    """The package's special ids as a plain dict, for the workers' specs."""
    from keras_transformer import special_ids as ids

    return dict(
        pad=ids.PAD_ID, unk=ids.UNK_ID, bos=ids.BOS_ID, eos=ids.EOS_ID, first=ids.NUM_SPECIAL_IDS
    )


def train_batch(cfg, ids, seed=0):
    """`(source, target_in, target_out)` int32 arrays of random ordinary
    tokens, targets starting with BOS."""
    import numpy as np

    rng = np.random.default_rng(seed)
    shape = (TRAIN_BATCH, SOURCE_LEN)
    source = rng.integers(ids["first"], cfg["vocab"], shape, dtype=np.int32)
    target = rng.integers(ids["first"], cfg["vocab"], (TRAIN_BATCH, TARGET_LEN + 1), dtype=np.int32)
    target[:, 0] = ids["bos"]
    return source, target[:, :-1], target[:, 1:]


def decode_sources(cfg, ids, shape=(DECODE_BATCH, DECODE_SOURCE_LEN), seed=1):
    """`shape` random ordinary tokens (default `(DECODE_BATCH, DECODE_SOURCE_LEN)`)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return rng.integers(ids["first"], cfg["vocab"], shape, dtype=np.int32)


def forbid_eos_before(logits, index, steps, eos_id):
    """`logits` `(n, vocab)` of position `index + 1` with EOS forbidden
    unless it is the last of `steps`, so every sentence decodes exactly
    `steps` tokens."""
    import tensorflow as tf

    eos = tf.one_hot(eos_id, tf.shape(logits)[-1], on_value=FORBIDDEN, off_value=0.0)
    return logits + tf.where(index + 1 < steps, eos, tf.zeros_like(eos))[None]


def forced_length(tokens_to_logits, steps, eos_id):
    """A `tokens_to_logits` function (see `keras_transformer.decoding`)
    whose sentences all run to exactly `steps` tokens."""

    def wrapped(ids, cache, index):
        logits, cache = tokens_to_logits(ids, cache, index)
        return forbid_eos_before(logits, index, steps, eos_id), cache

    return wrapped

"""Simple in-graph tokenizers, synthetic corpora and a one-line training
run for the training tests."""

import numpy as np
import tensorflow as tf

from keras_transformer import Transformer
from keras_transformer import training
from keras_transformer.tokenizer import Tokenizer
from tests.micro import micro_model

# The number tokenizer's ids are the numbers in the text: 0-3 are special.
TINY_VOCAB = MICRO_VOCAB = 20


class Numbers(Tokenizer):
    """ "5 17 3" -> [5, 17, 3]: the ids are written in the text (the
    package's special ids, 0-3)."""

    def tokenize(self, text):
        return tf.strings.to_number(tf.strings.split(text), tf.int32)


class Bytes(Tokenizer):
    """Each UTF-8 byte b -> id 4 + b (ids 0-3 are special)."""

    def tokenize(self, text):
        ids = tf.strings.unicode_decode(text, "UTF-8", errors="replace")
        return tf.cast(ids, tf.int32) % 256 + 4


number_tokenizer = Numbers()
byte_tokenizer = Bytes()


def reversal_corpus(n, vocab=TINY_VOCAB, min_len=3, max_len=9, seed=0):
    """Sentences of random ids in [4, vocab) and their reversals, as text."""
    rng = np.random.default_rng(seed)
    sources, targets = [], []
    for _ in range(n):
        ids = rng.integers(4, vocab, rng.integers(min_len, max_len + 1))
        sources.append(" ".join(map(str, ids)))
        targets.append(" ".join(map(str, ids[::-1])))
    return sources, targets


def substitution_corpus(n, seed=0, vocab=TINY_VOCAB):
    """Sentences of 3-9 random ids in [4, vocab) and their word-by-word
    translations by a fixed permutation: a task the tiny preset learns in
    a few hundred updates."""
    rng = np.random.default_rng(seed)
    sources, targets = [], []
    for _ in range(n):
        ids = rng.integers(4, vocab, rng.integers(3, 10))
        sources.append(" ".join(map(str, ids)))
        targets.append(" ".join(str(4 + (i - 4 + 7) % (vocab - 4)) for i in ids))
    return sources, targets


def letter_reversal_corpus(n, seed):
    """Sentences of 2-6 letters a-j and their reversals."""
    rng = np.random.default_rng(seed)
    letters = list("abcdefghij")
    sources, targets = [], []
    for _ in range(n):
        words = list(rng.choice(letters, rng.integers(2, 7)))
        sources.append(" ".join(words))
        targets.append(" ".join(words[::-1]))
    return sources, targets


def reversal_batches(n=200, seed=0, **options):
    """`make_batches` over `n` number-reversal pairs (1,024-token batches of
    sequences up to 16 tokens, shuffled with `seed`)."""
    sources, targets = reversal_corpus(n, seed=seed)
    pairs = training.text_pairs_from_lists(sources, targets)
    options = {"batch_tokens": 1024, "max_length": 16, "seed": seed, **options}
    return training.make_batches(pairs, number_tokenizer, vocab_size=TINY_VOCAB, **options)


def tiny_model(**overrides):
    """The tiny preset over `TINY_VOCAB` ids, without dropout: a model that
    learns the tasks above in a few hundred updates."""
    return Transformer.from_preset(
        "tiny", **{"vocab_size": TINY_VOCAB, "dropout": 0.0, **overrides}
    )


def train_quietly(model_dir, train_steps, model=None, batches=None, **options):
    """`training.train` of `model` (default: a new `micro_model()`) on
    `batches` (default: `reversal_batches()`), quietly: no TensorBoard and
    no progress bar unless `options` say otherwise. `options` are
    `TrainingSettings` fields and `train`'s other arguments. Returns the
    `TrainResult`."""
    model = micro_model() if model is None else model
    batches = reversal_batches() if batches is None else batches
    options = {"tensorboard": False, "verbose": 0, **options}
    fields = {k: options.pop(k) for k in list(options) if k in training.TrainingSettings.names()}
    settings = training.TrainingSettings(train_steps=train_steps, **fields)
    return training.train(model, batches, str(model_dir), settings, **options)


class NumberTokenizer(Numbers):
    """`number_tokenizer` with the detokenizer a `Translator` needs: ids
    back to their numbers, up to the first EOS, without special ids."""

    vocab_size = TINY_VOCAB

    def detokenize(self, ids):
        ids = tf.convert_to_tensor(ids, tf.int32)
        before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, 3), tf.int32), axis=1), 0)
        words = tf.ragged.boolean_mask(ids, before_eos & (ids >= 4))
        return tf.strings.reduce_join(tf.strings.as_string(words), axis=1, separator=" ")

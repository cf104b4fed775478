"""`PhraseSpellings`: banned phrases as the texts they are, in the graph.

A phrase is banned as its text (`decoding.BannedPhrases`): every id whose
piece is a stretch of the text, found by looking each stretch up among the
vocabulary's pieces, so that no segmentation of it reaches an output; as a
word, so both from a word's start ("▁T-Shirt") and after any piece that
ends with a character other than a letter or digit ("T-T-Shirt",
"(T-Shirt").
"""

import numpy as np
import tensorflow as tf

from keras_transformer.decoding import BannedPhrases
from keras_transformer.decoding.banned import breaking_ids
from keras_transformer.decoding.banned import ids_by_spelling
from keras_transformer.decoding.banned import spelling_columns
from keras_transformer.decoding.phrases import NO_TOKEN
from keras_transformer.tokenizer import WORD_MARK
from keras_transformer.translator.signatures import PHRASE_SEPARATOR


class PhraseSpellings(tf.Module):
    """Builds `BannedPhrases` from strings of phrases in the graph.

    Args:
        tokenizer: the translator's `Tokenizer`; its `spellings` say what
            each id writes (without them, phrases are banned as the ids the
            tokenizer segments them into).
        vocab_size: the ids the model outputs.
        every_spelling: False bans only the segmentation the tokenizer
            gives a phrase alone (which a search can route around by
            spelling it in other pieces; for comparison).

    Example:

    >>> spellings = PhraseSpellings(tokenizer, model.target_vocab_size)
    >>> banned = spellings.banned(tf.constant(["Hund ||| Katze"]), longest=127)
    """

    def __init__(self, tokenizer, vocab_size, every_spelling=True, name=None):
        super().__init__(name=name)
        self.tokenizer = tokenizer
        spellings = tokenizer.spellings(vocab_size) if every_spelling else None
        self.by_text = spellings is not None
        if not self.by_text:
            return
        lengths, columns = spelling_columns(spellings)
        self.lengths, self.columns = tf.constant(lengths), tf.constant(columns)
        self.texts = tf.constant(np.array(spellings, dtype=object), tf.string)
        self.longest = max(1, int(lengths.max(initial=0)))
        self.breaks = tf.constant(breaking_ids(spellings))
        # One lookup per rank of ids with the same bytes (`spelling_columns`).
        ranks = ids_by_spelling(spellings)
        self.lookups = []
        for rank in range(max((len(t) for t in ranks.values()), default=0)):
            pairs = [(text, tokens[rank]) for text, tokens in ranks.items() if len(tokens) > rank]
            keys = tf.constant([text for text, _ in pairs], tf.string)
            values = tf.constant([token for _, token in pairs], tf.int32)
            initializer = tf.lookup.KeyValueTensorInitializer(keys, values)
            self.lookups.append(tf.lookup.StaticHashTable(initializer, NO_TOKEN))

    def banned(self, phrases, longest):
        """Strings `(batch,)` of phrases joined by `|||` to the
        `BannedPhrases` of their texts; a phrase of more than `longest`
        pieces (as the tokenizer segments it alone), or with a character
        the target vocabulary cannot write, is no phrase: no output can
        spell it."""
        split = tf.strings.strip(tf.strings.split(phrases, PHRASE_SEPARATOR))  # (batch, None)
        ids = self.tokenizer.tokenize_target(split.flat_values)  # (phrases, None)
        lengths = ids.row_lengths()
        kept = (lengths > 0) & (lengths <= longest)
        if self.tokenizer.unk_id >= 0:
            kept &= tf.logical_not(tf.reduce_any(tf.equal(ids, self.tokenizer.unk_id), axis=1))
        if not self.by_text:
            table, ends = self._of_ids(ids, kept)
            return BannedPhrases(
                self._by_sentence(table, split.row_splits, NO_TOKEN),
                self._by_sentence(ends, split.row_splits, 0),
            )
        # Each phrase twice: as the tokenizer writes it alone (from a word's
        # start, "▁T-Shirt"), and without the word mark after a break
        # ("(T-Shirt", "T-T-Shirt").
        texts = tf.strings.reduce_join(tf.gather(self.texts, ids), axis=1)  # (phrases,)
        unmarked = tf.strings.regex_replace(texts, f"^{WORD_MARK}", "")
        texts = tf.reshape(tf.stack([texts, unmarked], axis=1), [-1])
        kept = tf.repeat(kept, 2)
        after_break = tf.tile([False, True], [tf.size(unmarked)]) & kept
        table, ends = self._of_texts(texts, kept)
        row_splits = split.row_splits * 2
        return BannedPhrases(
            self._by_sentence(table, row_splits, NO_TOKEN),
            self._by_sentence(ends, row_splits, 0),
            self.lengths,
            self.columns,
            self._by_sentence(after_break, row_splits, False),
            self.breaks,
        )

    def _of_ids(self, ids, kept):
        """`(table (phrases, nodes, 1), ends (phrases,))` of id phrases."""
        ends = tf.where(kept, tf.cast(ids.row_lengths(), tf.int32), 0)
        table = ids.to_tensor(NO_TOKEN)
        table = tf.pad(table, [[0, 0], [1, 0]], constant_values=NO_TOKEN)
        return table[:, :, None], ends

    def _of_texts(self, texts, kept):
        """`(table (phrases, nodes, columns), ends (phrases,))`: each
        stretch of each phrase's text looked up among the pieces."""
        ends = tf.where(kept, tf.strings.length(texts), 0)
        nodes = tf.reduce_max(tf.concat([ends, [0]], 0)) + 1
        end = tf.range(nodes)[:, None]
        size = tf.range(1, self.longest + 1)[None, :]
        start = end - size  # (nodes, longest)
        count = tf.size(texts)
        shape = [count, nodes, self.longest]
        inside = (start[None] >= 0) & (
            end[None] <= ends[:, None, None]
        )  # (phrases, nodes, longest)
        stretches = tf.strings.substr(
            tf.reshape(tf.repeat(texts, nodes * self.longest), [-1]),
            tf.reshape(tf.where(inside, start[None], 0), [-1]),
            tf.reshape(tf.broadcast_to(tf.where(inside, size[None], 0), shape), [-1]),
        )
        columns = [tf.reshape(lookup.lookup(stretches), shape) for lookup in self.lookups]
        table = tf.concat(columns, axis=2) if columns else tf.fill(shape, NO_TOKEN)
        return tf.where(tf.tile(inside, [1, 1, max(1, len(columns))]), table, NO_TOKEN), ends

    @staticmethod
    def _by_sentence(values, row_splits, padding):
        """Per-phrase `values` grouped by sentence `(batch, phrases, ...)`,
        padded with `padding`, with at least one phrase column."""
        grouped = tf.RaggedTensor.from_row_splits(values, row_splits, validate=False)
        dense = grouped.to_tensor(padding)
        pad = tf.maximum(1 - tf.shape(dense)[1], 0)
        paddings = tf.concat([[[0, 0], [0, pad]], tf.zeros([tf.rank(dense) - 2, 2], tf.int32)], 0)
        return tf.pad(dense, paddings, constant_values=padding)

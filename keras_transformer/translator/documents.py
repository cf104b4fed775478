"""Documents inside the graph: `keras_transformer_runtime.text.documents`'
splitting and joining with TensorFlow ops, so that a SavedModel's
signatures take whole texts as the Python runners do.

`split` turns a batch of texts into the pieces to translate (each
sentence, or each piece of whole words of a sentence over the limit);
`GraphSplit.joined` puts their translations back in the texts' places.

Example:

>>> parts = split(tf.constant(["It rains. Stay.", "Go"]), tokenizer, True, 127)
>>> parts.pieces
<tf.Tensor: shape=(3,), dtype=string, numpy=array([b'It rains.', b'Stay.', b'Go'], ...)>
"""

from typing import NamedTuple

import tensorflow as tf

from keras_transformer.tokenization import sentences
from keras_transformer_runtime.text.documents import PIECE_SEPARATOR
from keras_transformer_runtime.text.documents import WHITESPACE


class GraphSplit(NamedTuple):
    """A batch of texts split (see `split`).

    Attributes:
        segments: ragged `(batch, None)` strings, each text's sentences and
            separators alternately.
        units: int64 `(units,)`, the positions in `segments.flat_values` of
            the sentences translated (each sentence of a text of one, the
            non-empty ones of a text of several).
        pieces: `(pieces,)` strings to translate, each unit's in order.
        piece_units: int64 `(pieces,)`, the unit of each piece.
        over_limit: bool `(batch,)`, the texts with a sentence over the
            limit (translated in pieces; a word alone over it cut).
    """

    segments: tf.RaggedTensor
    units: tf.Tensor
    pieces: tf.Tensor
    piece_units: tf.Tensor
    over_limit: tf.Tensor

    def piece_rows(self):
        """int64 `(pieces,)`: the text each piece belongs to."""
        return tf.gather(tf.gather(self.segments.value_rowids(), self.units), self.piece_units)

    def joined(self, translations):
        """`(batch,)` strings: each text with its units' translations
        (`translations`, `(pieces,)` strings, one per piece; a unit's
        pieces joined by a space) in their places."""
        count = tf.shape(self.units, out_type=tf.int64)[0]
        units = tf.strings.unsorted_segment_join(
            translations, self.piece_units, count, separator=PIECE_SEPARATOR
        )
        flat = tf.tensor_scatter_nd_update(self.segments.flat_values, self.units[:, None], units)
        return tf.strings.reduce_join(self.segments.with_flat_values(flat), axis=1)

    def summed(self, values):
        """`(batch,)`: per text, the sum of its pieces' `values`."""
        return tf.math.unsorted_segment_sum(
            values, self.piece_rows(), self.segments.nrows(out_type=tf.int64)
        )

    def firsts(self, values, empty):
        """`(pieces,)`: per piece, its text's entry of `values` `(batch,)`
        where it is the text's first piece, else `empty`."""
        rows = self.piece_rows()
        first = tf.concat([[True], tf.not_equal(rows[1:], rows[:-1])], 0)[: tf.size(rows)]
        return tf.where(first, tf.gather(values, rows), empty)


def split(text, tokenizer, by_sentence, max_tokens):
    """Texts `(batch,)` split into what is translated (`GraphSplit`): with
    `by_sentence`, their sentences (`tokenization.sentences.segments`),
    else each text whole; a sentence of more than `max_tokens` source
    tokens (EOS not counted) becomes pieces of its words, each the most
    whole words that fit, a word alone over it a piece of its own.

    For a multilingual model (`tokenizer.languages`), a text that starts
    with a language tag (`>>fr<< ...`) asks for that language in each of
    its non-empty pieces: the tag is written before every one (its tokens
    counted against `max_tokens`), as the Python runners tag a request's
    sentences."""
    text = tf.convert_to_tensor(text, tf.string)
    tags = tf.fill(tf.shape(text), "")
    if tokenizer.languages:
        text, tags = leading_tags(text)
    if by_sentence:
        segments = sentences.segments(text)
    else:
        segments = tf.RaggedTensor.from_tensor(text[:, None])
    rows = segments.value_rowids()
    in_row = tf.range(tf.size(rows, out_type=tf.int64)) - tf.gather(segments.row_starts(), rows)
    alone = tf.equal(tf.gather(segments.row_lengths(), rows), 1)
    translated = tf.equal(in_row % 2, 0) & (alone | tf.not_equal(segments.flat_values, ""))
    units = tf.where(translated)[:, 0]
    unit_text = tf.gather(segments.flat_values, units)
    lengths = tokenizer.tokenize(unit_text).row_lengths()
    unit_rows = tf.gather(rows, units)
    tag_tokens = tokenizer.tokenize(tags).row_lengths()
    limits = max_tokens - tf.gather(tag_tokens, unit_rows)  # room for the tag
    long = lengths > limits
    long_units = tf.where(long)[:, 0]
    words = tf.strings.split(
        tf.strings.regex_replace(tf.gather(unit_text, long_units), f"[{WHITESPACE}]+", " "), " "
    )
    words = tf.ragged.boolean_mask(words, tf.not_equal(words, ""))
    counts = words.with_flat_values(tokenizer.tokenize(words.flat_values).row_lengths())
    chunks = _word_pieces(counts, tf.gather(limits, long_units))  # ragged (long units, words)
    chunk_counts = tf.reduce_max(chunks, axis=1) + 1
    per_unit = tf.tensor_scatter_nd_update(tf.ones_like(lengths), long_units[:, None], chunk_counts)
    starts = tf.cumsum(per_unit, exclusive=True)
    total = tf.reduce_sum(per_unit)
    whole = tf.where(~long)[:, 0]
    pieces = tf.tensor_scatter_nd_update(
        tf.fill(total[None], ""), tf.gather(starts, whole)[:, None], tf.gather(unit_text, whole)
    )
    word_piece = tf.gather(tf.gather(starts, long_units), words.value_rowids()) + chunks.flat_values
    long_pieces = tf.strings.unsorted_segment_join(words.flat_values, word_piece, total, " ")
    is_long_piece = tf.math.unsorted_segment_max(
        tf.ones_like(word_piece, tf.int32), word_piece, total
    )
    pieces = tf.where(is_long_piece > 0, long_pieces, pieces)
    piece_units = tf.repeat(tf.range(tf.size(per_unit, out_type=tf.int64)), per_unit)
    piece_tags = tf.gather(tags, tf.gather(unit_rows, piece_units))
    tagged = tf.not_equal(piece_tags, "") & tf.not_equal(tf.strings.strip(pieces), "")
    pieces = tf.where(tagged, tf.strings.join([piece_tags, pieces], " "), pieces)
    over_limit = tf.math.unsorted_segment_max(
        tf.cast(long, tf.int32), unit_rows, segments.nrows(out_type=tf.int64)
    )
    return GraphSplit(segments, units, pieces, piece_units, over_limit > 0)


def leading_tags(text):
    """`(texts, tags)`: each text without the language tag it starts with
    (and the space after it), and that tag (`""` for none)."""
    tagged = tf.strings.regex_full_match(text, r"(?s)\s*>>[^\s<>]+<<.*")
    tags = tf.strings.regex_replace(text, r"(?s)^\s*(>>[^\s<>]+<<).*$", r"\1")
    rest = tf.strings.regex_replace(text, r"^\s*>>[^\s<>]+<<\s*", "")
    return tf.where(tagged, rest, text), tf.where(tagged, tags, "")


def _word_pieces(counts, max_tokens):
    """`documents.word_pieces` of each row of ragged int64 token `counts`
    `(rows, words)` with its row's `max_tokens` (int64 `(rows,)`): ragged
    `(rows, words)`, the piece of each word, counted from 0 in its row."""
    # A column more than the longest row, so that the loop runs at least
    # once (an empty `TensorArray` of unknown shape cannot be stacked).
    dense = tf.pad(counts.to_tensor(0), [[0, 0], [0, 1]])
    valid = tf.sequence_mask(counts.row_lengths(), tf.shape(dense, out_type=tf.int64)[1])
    rows = tf.shape(dense)[0]

    def step(j, piece, total, taken, pieces):
        count, here = dense[:, j], valid[:, j]
        new = here & (taken > 0) & (total + count > max_tokens)
        piece = piece + tf.cast(new, tf.int64)
        total = tf.where(here, tf.where(new, count, total + count), total)
        taken = tf.where(here, tf.where(new, tf.ones_like(taken), taken + 1), taken)
        return j + 1, piece, total, taken, pieces.write(j, piece)

    zeros = tf.zeros([rows], tf.int64)
    _, _, _, _, pieces = tf.while_loop(
        lambda j, *_: j < tf.shape(dense)[1],
        step,
        (0, zeros, zeros, zeros, tf.TensorArray(tf.int64, size=tf.shape(dense)[1])),
    )
    by_word = tf.transpose(tf.reshape(pieces.stack(), [tf.shape(dense)[1], rows]))
    return tf.RaggedTensor.from_tensor(by_word, lengths=counts.row_lengths())

"""Banned phrases: texts no output spells, whichever ids spell them.

A subword vocabulary writes one text many ways ("▁Bauarbeiter" as one
piece, or "▁Bau" + "arbeiter", or byte pieces), so banning a phrase's one
segmentation lets a search write it another way. `BannedPhrases` holds,
for each phrase, every id that spells each stretch of it: a phrase of `n`
units (bytes, for text; ids, for `of_ids`) has nodes `0..n`, and
`table[..., e, c]` is the id in column `c` whose text is the stretch of the
phrase that ends at node `e` (and starts `lengths[id]` units earlier), or
`NO_TOKEN`. A run of consecutive output ids spells the phrase when it walks
from node 0 to node `n` through the table.

At every step a search forbids each id that would end such a run: nothing
is kept per hypothesis, each step reads the hypothesis's last ids. The rule
applies where the output controls do (`controls`), before the logits are
normalized: the scores are log-probabilities under the distribution
without the banned ids, and a forced prefix is exempt.
"""

import unicodedata
from typing import Any
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from keras_transformer.decoding.controls import NEG_INF
from keras_transformer.decoding.controls import token_marks
from keras_transformer.decoding.phrases import NO_TOKEN
from keras_transformer.decoding.phrases import check_ids
from keras_transformer.decoding.phrases import tokens_at


class BannedPhrases(NamedTuple):
    """Per sentence, phrases no output spells, and how ids spell them.

    Attributes:
        table: int32 `(batch, phrases, nodes, columns)`: the ids that
            spell each stretch of each phrase, by the node they end at
            (see the module); `NO_TOKEN` elsewhere.
        ends: int32 `(batch, phrases)`: each phrase's last node (its
            units); 0 is no phrase.
        lengths: optional int32 `(vocab,)`: the units each id spells (0:
            none, an id that breaks every run); `None`: one each.
        columns: optional int32 `(vocab,)`: each id's column in the
            tables; `None`: column 0.
        after_break: optional bool `(batch, phrases)`: phrases spelled
            only where the output starts or the id before the run is one
            of `breaks` (a word spelled after a hyphen or a quote, not
            inside a word); `None`: anywhere.
        breaks: bool `(vocab,)`, with `after_break`: the ids whose text
            ends with a character other than a letter or digit.

    Example:

    >>> # Ban "ab" where id 5 writes "a", 6 writes "b" and 7 writes "ab".
    >>> banned = BannedPhrases.of_texts([[b"ab"]], [b""] * 5 + [b"a", b"b", b"ab"])
    >>> ids, scores = beam_search(step, cache, 1, 10, banned=banned)
    """

    table: Any
    ends: Any
    lengths: Any = None
    columns: Any = None
    after_break: Any = None
    breaks: Any = None

    @classmethod
    def of_ids(cls, phrases):
        """Phrases (per sentence, a list of phrases, each a list of ids)
        banned as those ids only, one unit each."""
        count = max([1] + [len(p) for p in phrases])
        width = max([1] + [len(phrase) for p in phrases for phrase in p])
        table = np.full((len(phrases), count, width + 1, 1), NO_TOKEN, np.int32)
        ends = np.zeros((len(phrases), count), np.int32)
        for i, sentence in enumerate(phrases):
            for j, phrase in enumerate(sentence):
                check_ids(phrase, i)
                table[i, j, 1 : len(phrase) + 1, 0] = phrase
                ends[i, j] = len(phrase)
        return cls(table, ends)

    @classmethod
    def of_texts(cls, phrases, spellings, after_break=None):
        """Phrases (per sentence, a list of `bytes`) banned however the ids
        spell them: `spellings[id]` is the bytes the id writes (`b""`: none,
        such as special ids); ids with the same bytes (a byte piece and a
        one-character piece) each spell them. `after_break` (per sentence,
        a bool per phrase) bans a phrase only after a break (see the
        class; `breaking_ids`)."""
        lengths, columns = spelling_columns(spellings)
        ranked = ids_by_spelling(spellings)
        count = max([1] + [len(p) for p in phrases])
        width = max([1] + [len(phrase) for p in phrases for phrase in p])
        table = np.full(
            (len(phrases), count, width + 1, max(1, columns.max() + 1)), NO_TOKEN, np.int32
        )
        ends = np.zeros((len(phrases), count), np.int32)
        for i, sentence in enumerate(phrases):
            for j, phrase in enumerate(sentence):
                ends[i, j] = len(phrase)
                for end in range(1, len(phrase) + 1):
                    for start in range(end):
                        for token in ranked.get(phrase[start:end], []):
                            table[i, j, end, columns[token]] = token
        if after_break is None:
            return cls(table, ends, lengths, columns)
        flags = np.zeros(ends.shape, bool)
        for i, sentence in enumerate(after_break):
            flags[i, : len(sentence)] = sentence
        return cls(table, ends, lengths, columns, flags, breaking_ids(spellings))

    def rows(self):
        """The per-sentence part, which leaves the search with its rows."""
        rows = {"table": tf.convert_to_tensor(self.table), "ends": tf.convert_to_tensor(self.ends)}
        if self.after_break is not None:
            rows["after_break"] = tf.convert_to_tensor(self.after_break, tf.bool)
        return rows

    def with_rows(self, rows):
        """These phrases with another per-sentence part (`rows()`'s)."""
        return self._replace(**rows)

    def repeated(self, times):
        """These phrases with each row repeated `times` times (one per
        hypothesis of a beam)."""
        return self.with_rows({k: tf.repeat(v, times, axis=0) for k, v in self.rows().items()})

    def spelled_heads(self, ids, step):
        """Whether each hypothesis `ids` `(rows, width)` (BOS at 0, its
        ids at 1..step) ends with a run of ids that spells each phrase up
        to each node: bool `(rows, phrases, nodes)` (node 0: the run of no
        ids, where the phrase may begin)."""
        table = tf.convert_to_tensor(self.table, tf.int32)
        nodes, columns = tf.shape(table)[2], tf.shape(table)[3]
        window = tf.maximum(nodes - 1, 1)
        # The last `window` ids, last first, and the one before them.
        recent_and_before = tokens_at(ids, step - tf.range(window + 1), step)
        recent = recent_and_before[:, :-1]
        known = recent >= 0
        lengths = tf.where(known, self._of_ids(self.lengths, recent, 1), 0)
        column = tf.where(known, self._of_ids(self.columns, recent, 0), NO_TOKEN)
        after = tf.cumsum(lengths, axis=1, exclusive=True)  # units after each id
        node = tf.range(nodes)
        ends = node[None, :, None] - after[:, None, :]  # (rows, nodes, window)
        usable = (ends >= 1) & (column >= 0)[:, None, :] & (lengths > 0)[:, None, :]
        at = tf.clip_by_value(ends, 0, nodes - 1) * columns + tf.maximum(column, 0)[:, None, :]
        flat = tf.reshape(table, tf.concat([tf.shape(table)[:2], [-1]], 0))
        found = tf.gather(flat, tf.reshape(at, [tf.shape(at)[0], -1]), axis=2, batch_dims=1)
        found = tf.reshape(found, tf.concat([tf.shape(flat)[:2], [nodes, window]], 0))
        spelled = usable[:, None] & tf.equal(found, recent[:, None, None, :])
        # A run of the last i + 1 ids spells up to a node if each of them does.
        run = tf.equal(tf.cumsum(tf.cast(~spelled, tf.int32), axis=3), 0)
        reaches = tf.equal((after + lengths)[:, None, :], node[:, None])  # (rows, nodes, window)
        # Where the phrase may begin: before the run of the last i + 1 ids.
        may_begin = self._may_begin(recent_and_before)  # (rows, phrases, window + 1)
        heads = tf.reduce_any(run & reaches[:, None] & may_begin[:, :, None, 1:], axis=3)
        return tf.where(tf.equal(node, 0), may_begin[:, :, :1], heads)

    def _may_begin(self, before):
        """Whether a phrase may begin after each id of `before` `(rows,
        n)`: `(rows, phrases, n)`."""
        rows, phrases = tf.shape(before)[0], tf.shape(self.ends)[1]
        if self.after_break is None:
            return tf.ones([rows, phrases, tf.shape(before)[1]], tf.bool)
        breaks = tf.convert_to_tensor(self.breaks, tf.bool)
        breaking = (before < 0) | tf.gather(breaks, tf.maximum(before, 0))  # < 0: the start
        after_break = tf.convert_to_tensor(self.after_break, tf.bool)
        return ~after_break[:, :, None] | breaking[:, None, :]

    def completions(self, ids, step, vocab):
        """Which ids `(rows, vocab)` would end a run that spells one of
        each row's phrases after position `step` of `ids` `(rows, width)`."""
        table = tf.convert_to_tensor(self.table, tf.int32)
        ends = tf.convert_to_tensor(self.ends, tf.int32)
        last = tf.gather(table, ends, axis=2, batch_dims=2)  # (rows, phrases, columns)
        start = ends[:, :, None] - self._of_ids(self.lengths, last, 1)
        heads = self.spelled_heads(ids, step)
        spelled_before = tf.gather(heads, tf.maximum(start, 0), axis=2, batch_dims=2)
        completing = (last >= 0) & (ends[:, :, None] > 0) & (start >= 0) & spelled_before
        rows = tf.shape(last)[0]
        return token_marks(
            tf.reshape(tf.maximum(last, 0), [rows, -1]), tf.reshape(completing, [rows, -1]), vocab
        )

    def without_banned(self, logits, ids, step):
        """`logits` `(rows, vocab)` with each id that would end a banned
        phrase at `NEG_INF`."""
        banned = self.completions(ids, step, tf.shape(logits)[-1])
        return tf.where(banned, tf.constant(NEG_INF, logits.dtype), logits)

    @staticmethod
    def _of_ids(values, ids, default):
        """`values[ids]` (`ids` >= 0), or `default` everywhere for `None`."""
        if values is None:
            return tf.fill(tf.shape(ids), default)
        return tf.gather(tf.convert_to_tensor(values, tf.int32), tf.maximum(ids, 0))


def spelling_columns(spellings):
    """`(lengths, columns)`, int32 `(vocab,)` each, for ids that write
    `spellings` (`bytes` per id): each id's bytes, and its column in
    `BannedPhrases`' tables: its length less one, plus the longest length
    times the number of ids before it with the same bytes (`NO_TOKEN` for
    an id that writes nothing)."""
    lengths = np.array([len(text) for text in spellings], np.int32)
    longest = max(1, int(lengths.max(initial=0)))
    columns = np.full(len(spellings), NO_TOKEN, np.int32)
    for text, tokens in ids_by_spelling(spellings).items():
        for rank, token in enumerate(tokens):
            columns[token] = len(text) - 1 + longest * rank
    return lengths, columns


def ids_by_spelling(spellings):
    """`{bytes: [ids]}`: the ids that write each text (`spellings`, `bytes`
    per id; `b""` writes nothing), in id order: an id's place in its list
    is its rank in `spelling_columns`."""
    ids = {}
    for token, text in enumerate(spellings):
        if text:
            ids.setdefault(bytes(text), []).append(token)
    return ids


def breaking_ids(spellings):
    """bool `(vocab,)`: the ids whose text (`spellings`, `bytes` per id)
    ends with a character other than a letter or digit, after which a word
    begins (a hyphen, a quote, "▁"); a byte piece of a multi-byte
    character does not."""
    breaks = np.zeros(len(spellings), bool)
    for token, text in enumerate(spellings):
        last = text.decode("utf-8", errors="ignore")[-1:] if text else ""
        breaks[token] = bool(last) and not unicodedata.category(last).startswith(("L", "N"))
    return breaks

"""Word alignments of training pairs, for guided alignment training
(`Transformer`'s `GuidedAlignment`).

A pair's word links are a Pharaoh line, `"0-0 1-2 2-1"`: `i-j` links the
source's `i`-th whitespace-separated word with the target's `j`-th, as
eflomal and fast_align write them. `align_words` makes them with eflomal;
`with_word_links` adds them to text pairs, and `make_batches` then turns
each pair's links into token positions:

    source_words  the word of each source token (EOS: -2, padding: -3)
    target_links  the source word each target token's word is linked to
                  (EOS: -2, no link or padding: -1)

and each batch's alignment `(batch, target_len, source_len)` is 1 where a
target token's linked word is the source token's word (every piece of a
linked word, both ways, as Marian links subwords) and EOS meets EOS.
"""

import re

import tensorflow as tf

from keras_transformer_runtime.text.word_links import align_words

EOS_WORD = -2
SOURCE_PAD = -3
NO_LINK = -1

# A Pharaoh line: `i-j` pairs of word indices, separated by whitespace.
PHARAOH = r"\s*(\d+-\d+(\s+\d+-\d+)*)?\s*"
NOT_PHARAOH = '`links` must hold a Pharaoh line per pair ("0-0 1-2 2-1"). Received:'

__all__ = ["align_words", "with_word_links"]


def with_word_links(pairs, links):
    """`pairs` (a dataset of `(source, target)` strings) with each pair's
    word links (a list of Pharaoh lines, or a dataset of them, in the
    pairs' order) as a third string, for `make_batches`.

    Example:

    >>> pairs = text_pairs_from_files("train.en", "train.de")
    >>> links = align_words(*zip(*pairs.as_numpy_iterator()))
    >>> batches = make_batches(with_word_links(pairs, links), tokenizer, 4096)
    >>> (source, target_in, alignment), target_out = next(iter(batches.dataset))

    Raises:
        ValueError: a line of `links` (a list) is not a Pharaoh line (a
            dataset's stops the input pipeline with the same message).
    """
    if isinstance(links, tf.data.Dataset):
        links = links.map(_checked_line)
    else:
        links = [line.decode() if isinstance(line, bytes) else line for line in links]
        for number, line in enumerate(links):
            if not isinstance(line, str) or not re.fullmatch(PHARAOH, line):
                raise ValueError(f"{NOT_PHARAOH} line {number} (from 0) {line!r}")
        links = tf.data.Dataset.from_tensor_slices(tf.constant(links, tf.string))
    return tf.data.Dataset.zip(pairs, links).map(lambda pair, line: (*pair, line))


def _checked_line(line):
    """`line` once it is a Pharaoh line; else the pipeline stops, naming it."""
    check = tf.debugging.Assert(
        tf.strings.regex_full_match(line, PHARAOH),
        [NOT_PHARAOH, line],
    )
    with tf.control_dependencies([check]):
        return tf.identity(line)


def space_marks_of(tokenizer):
    """`tokenizer.space_marks` over its vocabulary, as a constant; a
    `ValueError` for a tokenizer whose pieces do not mark words."""
    marks = tokenizer.space_marks(tokenizer.vocab_size or 0)
    if marks is None:
        raise ValueError(
            "Word links count whitespace-separated words, which needs a tokenizer whose "
            'pieces mark them with SentencePiece\'s "▁" (SentencePieceTokenizer, '
            f"MarianTokenizer). Received: tokenizer={tokenizer!r}"
        )
    return tf.constant(marks)


def token_words(ids, starts):
    """The word of each id of `ids` (a vector): the count of word starts
    (`starts`, `Tokenizer.space_marks`) up to it, from 0 (pieces before
    the first start belong to word 0)."""
    return tf.maximum(tf.cumsum(tf.cast(tf.gather(starts, ids), tf.int32)) - 1, 0)


def token_links(source_ids, target_ids, line, starts):
    """`(source_words, target_links)` of one pair, before framing (see the
    module's docstring); links outside the pair's words are ignored."""
    source_words = token_words(source_ids, starts)
    target_words = token_words(target_ids, starts)
    links = tf.strings.to_number(
        tf.strings.split(tf.strings.split(line), "-").to_tensor(shape=[None, 2]), tf.int32
    )
    source_count = tf.reduce_max(tf.concat([source_words, [-1]], 0)) + 1
    target_count = tf.reduce_max(tf.concat([target_words, [-1]], 0)) + 1
    inside = (links[:, 0] < source_count) & (links[:, 1] < target_count) & (links[:, 0] >= 0)
    links = tf.boolean_mask(links, inside & (links[:, 1] >= 0))
    linked = tf.tensor_scatter_nd_max(tf.fill([target_count], NO_LINK), links[:, 1:], links[:, 0])
    return source_words, tf.gather(linked, target_words)


def frame_links(source_words, target_links, max_length, long_pairs):
    """`token_links` framed as `token_pairs.frame` frames the ids: EOS
    ends both."""
    if long_pairs == "truncate":
        source_words = source_words[: max_length - 1]
        target_links = target_links[: max_length - 1]
    eos = tf.constant([EOS_WORD], tf.int32)
    return tf.concat([source_words, eos], 0), tf.concat([target_links, eos], 0)


def alignment_matrix(source_words, target_links):
    """The batch's alignment `(batch, target_len, source_len)`, float32,
    from its padded `source_words` and `target_links`."""
    return tf.cast(
        tf.equal(target_links[:, :, tf.newaxis], source_words[:, tf.newaxis, :]), tf.float32
    )

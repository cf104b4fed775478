"""Text pairs to token ids, as `make_batches` prepares them: tokenize,
keep or drop (an empty side, a side longer than `max_length`), frame with
BOS and EOS; and `count_pairs`, what that keeps of a corpus and why."""

import dataclasses

import tensorflow as tf

from keras_transformer import _backend


def frame(source_ids, target_ids, max_length, long_pairs, bos_id, eos_id):
    """Adds BOS and EOS, truncating first if asked.

    Args:
        source_ids, target_ids: int32 vectors of one pair.
        max_length: the longest sequence, BOS or EOS included.
        long_pairs: `"truncate"` cuts each side to fit; `"drop"` leaves
            it (the pair was filtered before).
        bos_id, eos_id: the tokenizer's.

    Returns:
        `(source + [EOS], [BOS] + target, target + [EOS])`.
    """
    if long_pairs == "truncate":
        source_ids = source_ids[: max_length - 1]
        target_ids = target_ids[: max_length - 1]
    eos = tf.constant([eos_id], source_ids.dtype)
    bos = tf.constant([bos_id], source_ids.dtype)
    source = tf.concat([source_ids, eos], 0)
    target_in = tf.concat([bos, target_ids], 0)
    target_out = tf.concat([target_ids, eos], 0)
    return source, target_in, target_out


@dataclasses.dataclass
class PairCounts:
    """What `make_batches` does with the pairs of one pass.

    Attributes:
        read: pairs read.
        kept: pairs in the batches.
        empty: pairs dropped because a side has no token.
        too_long: pairs dropped because a side, with BOS or EOS, is longer
            than `max_length` (none when long pairs are truncated).
    """

    read: int
    kept: int
    empty: int
    too_long: int

    def __str__(self):
        return (
            f"{self.read:,} pairs read, {self.kept:,} kept, {self.empty:,} dropped for an "
            f"empty side, {self.too_long:,} dropped as longer than max_length"
        )


def tokenized(pairs, tokenizer, vocab_size, segmenters=None):
    """`(source_ids, target_ids)` int32 vectors of each pair, tokenized a few
    hundred strings at a time (much faster than one by one): by the
    `segmenters` `(source function, target function)`, by default the
    tokenizer's `tokenize` and `tokenize_target`. More parts of a pair
    (its word links) follow the ids as they are."""
    segment, tokenize_target = segmenters or (tokenizer.tokenize, tokenizer.tokenize_target)

    def tokenize(sources, targets, *rest):
        source_ids = tf.cast(segment(sources), tf.int32)
        target_ids = tf.cast(tokenize_target(targets), tf.int32)
        if vocab_size is not None:
            message = f"Token ids must be in [0, vocab_size={vocab_size})."
            checks = [
                tf.debugging.assert_less(source_ids.flat_values, vocab_size, message=message),
                tf.debugging.assert_less(target_ids.flat_values, vocab_size, message=message),
                tf.debugging.assert_non_negative(source_ids.flat_values, message=message),
                tf.debugging.assert_non_negative(target_ids.flat_values, message=message),
            ]
            with tf.control_dependencies(checks):
                source_ids = tf.identity(source_ids)
        return source_ids, target_ids, *rest

    return pairs.batch(256).map(tokenize, num_parallel_calls=tf.data.AUTOTUNE).unbatch()


def keep_pair(max_length, long_pairs):
    """A function of `(source_ids, target_ids, *more parts)` to booleans:
    `empty`, `too_long` (dropped unless truncated) and `kept`."""

    def keep(source_ids, target_ids, *_):
        empty = tf.logical_or(tf.size(source_ids) == 0, tf.size(target_ids) == 0)
        # With EOS (source) or BOS (target) a side must fit in max_length.
        longest = tf.maximum(tf.size(source_ids), tf.size(target_ids)) + 1
        too_long = tf.logical_and(tf.logical_not(empty), longest > max_length)
        if long_pairs == "truncate":
            too_long = tf.constant(False)
        kept = tf.logical_not(tf.logical_or(empty, too_long))
        return {"empty": empty, "too_long": too_long, "kept": kept}

    return keep


@_backend.tensorflow_only("training.count_pairs", "tf.data and the TF Text tokenizer")
def count_pairs(pairs, tokenizer, max_length=256, long_pairs="drop"):
    """How many of `pairs` `make_batches` keeps, and why it drops the others
    (one pass over the pairs, tokenizing them).

    Returns:
        A `PairCounts`.

    Example:

    >>> print(count_pairs(pairs, tokenizer, max_length=128))
    29,000 pairs read, 28,991 kept, 0 dropped for an empty side, 9 dropped as ...
    """
    keep = keep_pair(max_length, long_pairs)

    def add(total, pair):
        verdict = keep(*pair)
        pair = tf.stack([True, verdict["kept"], verdict["empty"], verdict["too_long"]])
        return total + tf.cast(pair, tf.int64)

    totals = tokenized(pairs, tokenizer, None).reduce(tf.zeros([4], tf.int64), add)
    read, kept, empty, too_long = (int(x) for x in totals.numpy())
    return PairCounts(read, kept, empty, too_long)

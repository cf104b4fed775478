"""tf.data input pipelines: text pairs in, token-budget batches out.

Text pairs come from `text_pairs` (each a `tf.data.Dataset` of `(source,
target)` scalar strings).

`make_batches` turns them into training batches entirely inside the graph:
tokenize, frame with BOS/EOS, drop or truncate over-long pairs, group by
length and batch by a token budget. Conventions (ids from
`keras_transformer.special_ids`):

    source     = tokens(src) + [EOS]
    target_in  = [BOS] + tokens(tgt)      (what the decoder reads)
    target_out = tokens(tgt) + [EOS]      (what it must predict)

padded with `pad_id` (0 by default). Elements are `((source, target_in),
target_out)`, exactly what `Transformer.fit` takes.
"""

import dataclasses
import math

import tensorflow as tf

from keras_transformer import _backend
from keras_transformer.special_ids import BOS_ID
from keras_transformer.special_ids import EOS_ID
from keras_transformer.special_ids import PAD_ID
from keras_transformer_runtime import _validation

LONG_PAIRS = ("drop", "truncate")
BUCKET_BY = ("auto", "longer_side", "each_side")


def bucket_boundaries(max_length, min_length=8, growth=1.1):
    """Length-bucket edges growing geometrically by `growth` from
    `min_length`, ending past `max_length` (tensor2tensor's scheme: a
    batch's padding stays within `growth - 1` of its longest sequence).

    Example:

    >>> bucket_boundaries(16, growth=1.1)
    [8, 9, 10, 11, 13, 15, 17]
    """
    if not growth > 1:
        raise ValueError(f"`growth` must be greater than 1. Received: growth={growth!r}")
    boundaries = []
    edge = min_length
    while edge <= max_length:
        boundaries.append(edge)
        edge = max(edge + 1, int(math.ceil(edge * growth)))
    boundaries.append(max_length + 1)
    return boundaries


def _frame(source_ids, target_ids, max_length, long_pairs, bos_id, eos_id):
    """Adds BOS/EOS; truncates if asked. Returns the three sequences."""
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


def _tokenized(pairs, tokenizer, vocab_size, tokenize_target=None):
    """`(source_ids, target_ids)` int32 vectors of each pair, tokenized a few
    hundred strings at a time (much faster than one by one): sources by
    `tokenizer`, targets by `tokenize_target` (default the tokenizer's
    `tokenize_target` if it has one, else `tokenizer`)."""
    if tokenize_target is None:
        tokenize_target = getattr(tokenizer, "tokenize_target", tokenizer)

    def tokenize(sources, targets):
        source_ids = tf.cast(tokenizer(sources), tf.int32)
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
        return source_ids, target_ids

    return pairs.batch(256).map(tokenize, num_parallel_calls=tf.data.AUTOTUNE).unbatch()


def _batch_by_each_side(frames, boundaries, batch_tokens, pad_id):
    """Batches `(source, target_in, target_out)` frames in a bucket per
    (source bucket, target bucket), each padded to its batch's longest."""
    # Bucket i holds lengths in [boundaries[i - 1], boundaries[i]).
    longest = [edge - 1 for edge in boundaries]
    count = len(boundaries)
    batch_sizes = tf.constant(
        [max(1, batch_tokens // max(s, t)) for t in longest for s in longest], tf.int64
    )
    edges = tf.constant(boundaries, tf.int32)

    def bucket(sequence):
        return tf.reduce_sum(tf.cast(tf.size(sequence) >= edges, tf.int64))

    def key(source, target_in, target_out):
        return bucket(target_in) * count + bucket(source)

    def batch(key, frames):
        return frames.padded_batch(
            tf.gather(batch_sizes, key),
            padded_shapes=([None], [None], [None]),
            padding_values=(pad_id, pad_id, pad_id),
        )

    return frames.group_by_window(
        key_func=key, reduce_func=batch, window_size_func=lambda key: tf.gather(batch_sizes, key)
    )


def _keep_pair(max_length, long_pairs):
    """A function of `(source_ids, target_ids)` to booleans: `empty`,
    `too_long` (dropped unless truncated) and `kept`."""

    def keep(source_ids, target_ids):
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
    keep = _keep_pair(max_length, long_pairs)

    def add(total, pair):
        verdict = keep(*pair)
        pair = tf.stack([True, verdict["kept"], verdict["empty"], verdict["too_long"]])
        return total + tf.cast(pair, tf.int64)

    totals = _tokenized(pairs, tokenizer, None).reduce(tf.zeros([4], tf.int64), add)
    read, kept, empty, too_long = (int(x) for x in totals.numpy())
    return PairCounts(read, kept, empty, too_long)


@_backend.tensorflow_only("training.make_batches", "tf.data and the TF Text tokenizer")
def make_batches(
    pairs,
    tokenizer,
    batch_tokens,
    max_length=256,
    long_pairs="drop",
    shuffle=True,
    seed=None,
    shuffle_buffer=100_000,
    repeat=False,
    vocab_size=None,
    input_context=None,
    bos_id=None,
    eos_id=None,
    pad_id=None,
    sampling_alpha=None,
    cache_ids=False,
    bucket_growth=1.05,
    bucket_by="auto",
):
    """Tokenizes text pairs and batches them by a token budget.

    Pairs are grouped into length buckets (`bucket_boundaries` with
    `bucket_growth`, by the longer side or by each side: `bucket_by`); each
    bucket's batch size is `batch_tokens // longest length in the bucket`,
    so no batch holds more than `batch_tokens` source positions or target
    positions, padding included (the paper's ~25,000 source + 25,000
    target tokens is `batch_tokens=25000`). Pairs with an empty side are
    dropped, as are (unless truncated) pairs with a side longer than
    `max_length`; every kept pair appears exactly once per pass (the
    buckets' part-filled batches end each pass, unless `repeat`). The
    returned dataset's `pair_counts()` counts them (`PairCounts`, one pass
    over the pairs).

    Under `strategy.distribute_datasets_from_function`, pass the
    `input_context`: the pairs are sharded between input pipelines and each
    replica gets `batch_tokens / num_replicas` tokens per batch, so
    `batch_tokens` stays the global budget.

    Args:
        pairs: dataset of `(source, target)` scalar strings.
        tokenizer: callable mapping a batch of strings `(n,)` to ragged
            int ids `(n, None)`, in-graph (e.g. a `SentencePieceTokenizer`);
            its `tokenize_target`, if it has one, tokenizes the targets
            (a `MarianTokenizer` segments each side with its own model).
        batch_tokens: the token budget of a (global) batch.
        max_length: the longest sequence kept, EOS/BOS included.
        long_pairs: `"drop"` pairs with a side longer than `max_length`,
            or `"truncate"` it.
        shuffle: whether to shuffle pairs (before batching) and batches.
        seed: shuffle seed; `None` draws a fresh order in every process,
            which is what a resumed training run wants.
        shuffle_buffer: pairs held by the shuffle buffer.
        repeat: repeat the pairs forever (step-based training) instead of
            one pass. The passes run into each other before batching, so
            no length bucket ends a pass with a part-filled batch.
        vocab_size: if given, ids are checked to be below it (XLA cannot
            check them inside the model).
        input_context: a `tf.distribute.InputContext`, or `None`.
        bos_id: id starting the decoder input; default the tokenizer's
            `bos_id`, or `special_ids.BOS_ID` for a tokenizer without one.
        eos_id: id ending every sequence; default the tokenizer's `eos_id`
            (or `EOS_ID`).
        pad_id: id filling batches, the model's `pad_id`; default the
            tokenizer's `pad_id` (or `PAD_ID`).
        sampling_alpha: subword regularization (off by default): each pass
            draws a new segmentation of every sentence with the tokenizer's
            `sample_tokenize(text, alpha)` (`SentencePieceTokenizer`:
            unigram smoothing, or the BPE-dropout probability). Only for
            training data: evaluation, `Translator` and export always
            tokenize deterministically.
        cache_ids: tokenize the pairs once, on the first pass, and keep
            their ids in memory (about 4 bytes per token) for the later
            passes, which still shuffle. For corpora that fit in memory;
            not with `sampling_alpha`, which needs a new segmentation
            every pass.
        bucket_growth: how much longer each length bucket's longest
            sequence is than the previous one's; a batch's padding stays
            within `bucket_growth - 1` of its longest sequence.
        bucket_by: `"longer_side"` groups pairs by the longer of their
            source and target, so a batch's shorter side pads up to the
            other's lengths; `"each_side"` groups them by source length and
            target length (a bucket per pair of buckets), so neither side
            pads beyond its own bucket, but there are many more buckets,
            each ending a single pass with a part-filled batch. `"auto"`
            (the default): `"each_side"` when `repeat`, else
            `"longer_side"`. `benchmarks/training_input.py` measures the
            padding of each.

    Returns:
        A dataset of `((source, target_in), target_out)` int32 batches.

    Example:

    >>> batches = make_batches(pairs, tokenizer, batch_tokens=4096)
    >>> (source, target_in), target_out = next(iter(batches))
    """
    _validation.check_positive_int(batch_tokens=batch_tokens, max_length=max_length)
    bos_id = getattr(tokenizer, "bos_id", BOS_ID) if bos_id is None else bos_id
    eos_id = getattr(tokenizer, "eos_id", EOS_ID) if eos_id is None else eos_id
    pad_id = getattr(tokenizer, "pad_id", PAD_ID) if pad_id is None else pad_id
    _validation.check_choice(LONG_PAIRS, long_pairs=long_pairs)
    _validation.check_choice(BUCKET_BY, bucket_by=bucket_by)
    if bucket_by == "auto":
        bucket_by = "each_side" if repeat else "longer_side"
    if max_length < 2:
        raise ValueError(f"`max_length` must be at least 2. Received: max_length={max_length}")
    segment = tokenizer
    segment_target = getattr(tokenizer, "tokenize_target", tokenizer)
    if sampling_alpha is not None:
        if not callable(getattr(tokenizer, "sample_tokenize", None)):
            raise ValueError(
                "`sampling_alpha` needs a tokenizer that samples segmentations "
                "(`sample_tokenize`, as SentencePieceTokenizer has). Received: "
                f"sampling_alpha={sampling_alpha!r} with tokenizer={tokenizer!r}"
            )
        if not isinstance(sampling_alpha, (int, float)) or not 0 < sampling_alpha <= 1:
            raise ValueError(
                f"`sampling_alpha` must be in (0, 1]. Received: sampling_alpha={sampling_alpha!r}"
            )

        def segment(strings):
            return tokenizer.sample_tokenize(strings, sampling_alpha)

        segment_target = segment

    if not isinstance(cache_ids, bool):
        raise ValueError(f"`cache_ids` must be True or False. Received: cache_ids={cache_ids!r}")
    if cache_ids and sampling_alpha is not None:
        raise ValueError(
            "`cache_ids` keeps one segmentation of every sentence, `sampling_alpha` draws a new "
            f"one every pass: choose one. Received: cache_ids={cache_ids!r}, "
            f"sampling_alpha={sampling_alpha!r}"
        )
    if input_context is not None:
        pairs = pairs.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        batch_tokens = batch_tokens // input_context.num_replicas_in_sync
    if batch_tokens < max_length:
        raise ValueError(
            "`batch_tokens` (per replica) must hold one pair of `max_length` "
            f"tokens (max_length={max_length}). Received: batch_tokens={batch_tokens}"
        )
    keep = _keep_pair(max_length, long_pairs)
    if shuffle and not cache_ids:
        pairs = pairs.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    ids = _tokenized(pairs, segment, vocab_size, segment_target).filter(
        lambda s, t: keep(s, t)["kept"]
    )
    if cache_ids:
        # Tokenized in file order, once; the ids are shuffled on every pass.
        ids = ids.cache()
        if shuffle:
            ids = ids.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        ids = ids.repeat()  # a new shuffle every pass (reshuffle_each_iteration)
    dataset = ids.map(
        lambda s, t: _frame(s, t, max_length, long_pairs, bos_id, eos_id),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    boundaries = bucket_boundaries(max_length, growth=bucket_growth)
    if bucket_by == "each_side":
        dataset = _batch_by_each_side(dataset, boundaries, batch_tokens, pad_id)
    else:
        # Bucket i holds lengths < boundaries[i]; the extra last bucket is empty.
        batch_sizes = [max(1, batch_tokens // (edge - 1)) for edge in boundaries] + [1]
        dataset = dataset.bucket_by_sequence_length(
            element_length_func=lambda s, ti, to: tf.maximum(tf.size(s), tf.size(ti)),
            bucket_boundaries=boundaries,
            bucket_batch_sizes=batch_sizes,
            padding_values=(pad_id, pad_id, pad_id),
        )
    if shuffle:
        dataset = dataset.shuffle(128, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.map(lambda s, ti, to: ((s, ti), to)).prefetch(tf.data.AUTOTUNE)
    # One pass over the pairs that says how many are kept and why the others
    # are not; `train` reports it when no batch comes out.
    dataset.pair_counts = lambda: count_pairs(pairs, tokenizer, max_length, long_pairs)
    return dataset


def no_batch_message(train_data):
    """Why `train_data` (a dataset, or a function of an input context) gave
    `train` no batch, with `make_batches`' pair counts if known."""
    dataset = train_data
    if callable(train_data) and not isinstance(train_data, tf.data.Dataset):
        dataset = train_data(tf.distribute.InputContext())
    counts = getattr(dataset, "pair_counts", None)
    reason = f": {counts()}" if counts else ""
    return (
        "The training data produced no batch, so nothing was trained" + reason + ". Check the "
        "input files, and that max_length fits the sentences."
    )


def repeated_for_training(train_data, strategy):
    """`train_data` (a dataset, or a function of an input context) repeated
    forever and, for a function, distributed over the replicas."""
    if isinstance(train_data, tf.data.Dataset) or not callable(train_data):
        return train_data.repeat()
    if strategy.num_replicas_in_sync > 1:
        return strategy.distribute_datasets_from_function(
            lambda context: train_data(context).repeat()
        )
    return train_data(tf.distribute.InputContext()).repeat()

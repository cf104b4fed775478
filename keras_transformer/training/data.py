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

padded with the tokenizer's `pad_id`. Elements of its `TokenBatches.dataset`
are `((source, target_in), target_out)`, exactly what `Transformer.fit` takes.
"""

import tensorflow as tf

from keras_transformer import _backend
from keras_transformer.tokenizer import Tokenizer
from keras_transformer.training import bucketing
from keras_transformer.training import shape_sample
from keras_transformer.training import token_pairs
from keras_transformer.training import word_links
from keras_transformer.training.batch_shapes import BatchShapes
from keras_transformer.training.devices import recommended_jit_compile
from keras_transformer.training.multilingual import MixedCorpora
from keras_transformer.training.token_batches import TokenBatches
from keras_transformer_runtime import validation

LONG_PAIRS = ("drop", "truncate")
BUCKET_BY = ("auto", "longer_side", "each_side")
STATIC_SHAPES = ("auto", True, False)


# Pairs whose lengths fit the static shapes (`BatchShapes.fit`): the first
# ones of the corpus, in its own order, so that every run over the same
# files (and every worker of one) gets the same shapes.


def resolve_static_shapes(static_shapes):
    """`make_batches`' `static_shapes` as a bool: `"auto"` is whether the
    training step is compiled by XLA here (`recommended_jit_compile`)."""
    validation.check_choice(STATIC_SHAPES, static_shapes=static_shapes)
    return recommended_jit_compile() if static_shapes == "auto" else static_shapes


@_backend.tensorflow_only("training.fit_batch_shapes", "tf.data and the TF Text tokenizer")
def fit_batch_shapes(
    pairs, tokenizer, batch_tokens, max_length=256, long_pairs="drop", max_shapes=24
):
    """The `BatchShapes` `make_batches(static_shapes=True)` pads to: at most
    `max_shapes` lengths fitted to a sample of the whole of
    `pairs`, tokenized and filtered as `make_batches` does them, with
    batch sizes under `batch_tokens` (per replica).

    Args:
        pairs: dataset of `(source, target)` scalar strings.
        tokenizer: the `Tokenizer` of `make_batches`.
        batch_tokens: the token budget of a batch (per replica).
        max_length: the longest sequence kept, EOS/BOS included.
        long_pairs: `"drop"` or `"truncate"`, as `make_batches`.
        max_shapes: the most shapes.

    Returns:
        A `BatchShapes`.

    Example:

    >>> print(fit_batch_shapes(pairs, tokenizer, batch_tokens=4096, max_length=128))
    24 batch shapes, lengths 10, 11, ..., 59, 128; padding 11.2% of source ...
    """
    validation.check_choice(LONG_PAIRS, long_pairs=long_pairs)
    lengths, sample = shape_sample.sampled_lengths(pairs, tokenizer, max_length, long_pairs)
    return BatchShapes.fit(
        lengths[:, 0], lengths[:, 1], batch_tokens, max_length, max_shapes, sample=sample
    )


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
    sampling_alpha=None,
    cache_ids=False,
    bucket_growth=None,
    bucket_by="auto",
    static_shapes="auto",
    max_shapes=24,
):
    """Tokenizes text pairs and batches them by a token budget.

    Pairs are grouped into length buckets; each bucket's batch size is
    `batch_tokens // longest length in the bucket`, so no batch holds more
    than `batch_tokens` source positions or target positions, padding
    included (the paper's ~25,000 source + 25,000 target tokens is
    `batch_tokens=25000`). Pairs with an empty side are dropped, as are
    (unless truncated) pairs with a side longer than `max_length`; every
    kept pair appears exactly once per pass (the buckets' part-filled
    batches end each pass, unless `repeat`). The returned batches'
    `pair_counts()` counts them (`PairCounts`, one pass over the pairs).

    Shapes: by default (`static_shapes=False` on a CPU) each batch is
    padded to its own longest sequence, in fine buckets (`bucket_growth`,
    by the longer side or by each side: `bucket_by`), which wastes little
    but makes hundreds of batch shapes. A step compiled by XLA (on GPUs
    and TPUs, or `jit_compile=True`) is compiled anew for each shape, so
    there (`static_shapes=True`, the default where XLA compiles) every
    batch is padded to one of at most `max_shapes` `BatchShapes`, fitted
    to a sample's lengths (`shape_sample`): both sides to the length of
    the pair's bucket, a fixed batch size per bucket, a part-filled batch
    completed with rows of padding (which the loss and metrics ignore).
    The batches' `shapes` is that `BatchShapes` (`None` without).

    Under `strategy.distribute_datasets_from_function`, pass the
    `input_context`: the pairs are sharded between input pipelines and each
    replica gets `batch_tokens / num_replicas` tokens per batch, so
    `batch_tokens` stays the global budget.

    Args:
        pairs: dataset of `(source, target)` scalar strings, or the
            `MixedCorpora` of `mix_corpora` (its weights are kept in the
            batches' `mixing_weights`); or of `(source, target, links)`,
            the pair's word links as a Pharaoh line (`with_word_links`),
            for guided alignment training: each batch's inputs are then
            `(source, target_in, alignment)`, the alignment `(batch,
            target_len, source_len)` (`training.word_links`).
        tokenizer: a `keras_transformer.tokenization.Tokenizer` (e.g. a
            `SentencePieceTokenizer`): `tokenize` segments the sources,
            `tokenize_target` the targets (a `MarianTokenizer` segments
            each side with its own model); its `bos_id` starts the decoder
            input, its `eos_id` ends every sequence and its `pad_id` (the
            model's) fills the batches.
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
        bucket_growth: dynamic shapes only: how much longer each length
            bucket's longest sequence is than the previous one's; a batch's
            padding stays within `bucket_growth - 1` of its longest
            sequence. Default 1.05.
        bucket_by: dynamic shapes only: `"longer_side"` groups pairs by the
            longer of their source and target, so a batch's shorter side
            pads up to the other's lengths; `"each_side"` groups them by
            source length and target length (a bucket per pair of
            buckets), so neither side pads beyond its own bucket, but there
            are many more buckets, each ending a single pass with a
            part-filled batch. `"auto"` (the default): `"each_side"` when
            `repeat`, else `"longer_side"` (static shapes are always by the
            longer side). `benchmarks/training_input.py` measures the
            padding of each.
        static_shapes: `True`: batches of at most `max_shapes` shapes (see
            above); `False`: each batch padded to its own longest; `"auto"`
            (the default): `True` where `recommended_jit_compile()` (a
            GPU). Pass `True` when compiling with `jit_compile=True` on a
            CPU.
        max_shapes: the most batch shapes under `static_shapes`.

    Returns:
        A `TokenBatches`: its `dataset` of `((source, target_in),
        target_out)` int32 batches, their `shapes`, the `tokenizer`, the
        `mixing_weights` and `pair_counts()`.

    Example:

    >>> batches = make_batches(pairs, tokenizer, batch_tokens=4096)
    >>> (source, target_in), target_out = next(iter(batches.dataset))

    For a step compiled by XLA, a few shapes:

    >>> batches = make_batches(pairs, tokenizer, 4096, repeat=True, static_shapes=True)
    >>> print(batches.shapes)
    24 batch shapes, lengths 10, 11, ..., 59, 128; padding 11.2% of source ...
    """
    validation.check_positive_int(
        batch_tokens=batch_tokens, max_length=max_length, max_shapes=max_shapes
    )
    mixing_weights = None
    if isinstance(pairs, MixedCorpora):
        pairs, mixing_weights = pairs.pairs, pairs.weights
    _check_tokenizer(tokenizer)
    bos_id, eos_id, pad_id = tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id
    validation.check_choice(LONG_PAIRS, long_pairs=long_pairs)
    static = resolve_static_shapes(static_shapes)
    bucket_by = _bucketing(static, bucket_by, bucket_growth, repeat)
    if max_length < 2:
        raise ValueError(f"`max_length` must be at least 2. Received: max_length={max_length}")
    segmenters = _segmenters(tokenizer, sampling_alpha, cache_ids)
    if input_context is not None:
        batch_tokens = batch_tokens // input_context.num_replicas_in_sync
    if batch_tokens < max_length:
        raise ValueError(
            "`batch_tokens` (per replica) must hold one pair of `max_length` "
            f"tokens (max_length={max_length}). Received: batch_tokens={batch_tokens}"
        )
    # Fitted to the pairs before sharding: every replica gets the same shapes.
    shapes = None
    if static:
        shapes = fit_batch_shapes(
            pairs, tokenizer, batch_tokens, max_length, long_pairs, max_shapes
        )
    if input_context is not None:
        pairs = pairs.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    keep = token_pairs.keep_pair(max_length, long_pairs)
    if shuffle and not cache_ids:
        pairs = pairs.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    ids = token_pairs.tokenized(pairs, tokenizer, vocab_size, segmenters).filter(
        lambda *pair: keep(*pair)["kept"]
    )
    linked = len(pairs.element_spec) == 3
    if linked:  # each pair's word links, as token positions
        starts = word_links.space_marks_of(tokenizer)
        ids = ids.map(
            lambda s, t, line: (s, t, *word_links.token_links(s, t, line, starts)),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    if cache_ids:
        # Tokenized in file order, once; the ids are shuffled on every pass.
        ids = ids.cache()
        if shuffle:
            ids = ids.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        ids = ids.repeat()  # a new shuffle every pass (reshuffle_each_iteration)
    dataset = ids.map(
        lambda s, t, *links: (
            *token_pairs.frame(s, t, max_length, long_pairs, bos_id, eos_id),
            *(word_links.frame_links(*links, max_length, long_pairs) if links else ()),
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    padding = (pad_id,) * 3
    if linked:
        padding += (word_links.SOURCE_PAD, word_links.NO_LINK)
    if static:
        dataset = bucketing.batch_to_static_shapes(dataset, shapes, padding)
    else:
        batch = {
            "each_side": bucketing.batch_by_each_side,
            "longer_side": bucketing.batch_by_longer_side,
        }[bucket_by]
        boundaries = bucketing.bucket_boundaries(max_length, growth=bucket_growth or 1.05)
        dataset = batch(dataset, boundaries, batch_tokens, padding)
    if shuffle:
        dataset = dataset.shuffle(128, seed=seed, reshuffle_each_iteration=True)
    if linked:
        dataset = dataset.map(
            lambda s, ti, to, *links: ((s, ti, word_links.alignment_matrix(*links)), to)
        )
    else:
        dataset = dataset.map(lambda s, ti, to: ((s, ti), to))
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    return TokenBatches(
        dataset,
        shapes,
        tokenizer,
        mixing_weights,
        # One pass over the pairs that says how many are kept and why the
        # others are not; `train` reports it when no batch comes out.
        counter=lambda: token_pairs.count_pairs(pairs, tokenizer, max_length, long_pairs),
    )


def _bucketing(static, bucket_by, bucket_growth, repeat):
    """`bucket_by` resolved (`"auto"`), after refusing the dynamic-shape
    options with static shapes."""
    validation.check_choice(BUCKET_BY, bucket_by=bucket_by)
    if bucket_growth is not None and not bucket_growth > 1:
        raise ValueError(
            f"`bucket_growth` must be greater than 1. Received: bucket_growth={bucket_growth!r}"
        )
    if static and (bucket_by != "auto" or bucket_growth is not None):
        raise ValueError(
            "`bucket_by` and `bucket_growth` shape the buckets of dynamic shapes; static shapes "
            "are buckets of the longer side fitted to the corpus (`max_shapes`). Received: "
            f"static_shapes=True with bucket_by={bucket_by!r}, bucket_growth={bucket_growth!r}"
        )
    if bucket_by == "auto":
        return "each_side" if repeat else "longer_side"
    return bucket_by


def _check_tokenizer(tokenizer):
    """Raises unless `tokenizer` is a `Tokenizer` with the special ids a
    batch needs."""
    if not isinstance(tokenizer, Tokenizer):
        raise ValueError(
            "`tokenizer` must be a keras_transformer.tokenization.Tokenizer (a "
            "SentencePieceTokenizer, a MarianTokenizer or a subclass of your own). "
            f"Received: tokenizer={tokenizer!r}"
        )
    for name, value in (("bos_id", tokenizer.bos_id), ("eos_id", tokenizer.eos_id)):
        if value < 0:
            raise ValueError(
                f"`tokenizer` must define `{name}` (batches frame every pair with it). "
                f"Received: tokenizer.{name}={value}"
            )


def _segmenters(tokenizer, sampling_alpha, cache_ids):
    """The functions that segment sources and targets: the tokenizer's own,
    or its sampled segmentation under `sampling_alpha`."""
    if not isinstance(cache_ids, bool):
        raise ValueError(f"`cache_ids` must be True or False. Received: cache_ids={cache_ids!r}")
    if sampling_alpha is None:
        return tokenizer.tokenize, tokenizer.tokenize_target
    if not tokenizer.samples_segmentations:
        raise ValueError(
            "`sampling_alpha` needs a tokenizer that samples segmentations "
            "(`sample_tokenize`, as SentencePieceTokenizer has). Received: "
            f"sampling_alpha={sampling_alpha!r} with tokenizer={tokenizer!r}"
        )
    if not isinstance(sampling_alpha, (int, float)) or not 0 < sampling_alpha <= 1:
        raise ValueError(
            f"`sampling_alpha` must be in (0, 1]. Received: sampling_alpha={sampling_alpha!r}"
        )
    if cache_ids:
        raise ValueError(
            "`cache_ids` keeps one segmentation of every sentence, `sampling_alpha` draws a new "
            f"one every pass: choose one. Received: cache_ids={cache_ids!r}, "
            f"sampling_alpha={sampling_alpha!r}"
        )

    def segment(strings):
        return tokenizer.sample_tokenize(strings, sampling_alpha)

    return segment, segment

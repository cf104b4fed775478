import collections
import gzip

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_transformer.special_ids import BOS_ID
from keras_transformer.special_ids import EOS_ID
from keras_transformer.training import make_batches
from keras_transformer.training import text_pairs_from_files
from keras_transformer.training import text_pairs_from_lists
from keras_transformer.training import text_pairs_from_tfds
from keras_transformer.training.bucketing import bucket_boundaries
from keras_transformer.training.token_pairs import PairCounts
from keras_transformer.training.token_pairs import count_pairs
from tests.training.helpers import Numbers
from tests.training.helpers import byte_tokenizer
from tests.training.helpers import number_tokenizer
from tests.training.helpers import reversal_corpus

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design


def strip(row):
    return tuple(int(x) for x in row if x != 0)


def collect(batches, take=None):
    """The `(source, target_in, target_out)` arrays of `make_batches`'
    batches: one pass, or the first `take` batches."""
    dataset = batches.dataset if take is None else batches.dataset.take(take)
    return [(s.numpy(), ti.numpy(), to.numpy()) for (s, ti), to in dataset]


def test_batches_respect_the_budget_and_cover_each_pair_once():
    sources, targets = reversal_corpus(700, vocab=50, min_len=1, max_len=60)
    budget = 300
    batches = collect(
        make_batches(
            text_pairs_from_lists(sources, targets),
            number_tokenizer,
            batch_tokens=budget,
            max_length=40,
            seed=3,
        )
    )
    seen = collections.Counter()
    for source, target_in, target_out in batches:
        assert source.size <= budget and target_in.size <= budget
        assert target_in.shape == target_out.shape
        for s in source:
            seen[strip(s)] += 1
    kept = collections.Counter(
        tuple(int(x) for x in s.split()) + (EOS_ID,)
        for s, t in zip(sources, targets, strict=True)
        if len(s.split()) + 1 <= 40 and len(t.split()) + 1 <= 40
    )
    assert seen == kept
    assert len(kept) < 700  # some pairs were long enough to be dropped
    # Buckets keep padding small: real tokens fill most of each batch.
    real = sum((s != 0).sum() for s, _, _ in batches)
    assert real / sum(s.size for s, _, _ in batches) > 0.75


def test_bos_eos_framing():
    batches = collect(
        make_batches(
            text_pairs_from_lists(["5 6 7"], ["8 9"]),
            number_tokenizer,
            64,
            max_length=16,
            shuffle=False,
        )
    )
    ((source, target_in, target_out),) = batches
    assert strip(source[0]) == (5, 6, 7, EOS_ID)
    assert strip(target_in[0]) == (BOS_ID, 8, 9)
    assert strip(target_out[0]) == (8, 9, EOS_ID)
    assert source.dtype == np.int32


class TwoSidedTokenizer(Numbers):
    """Numbers on the source side; on the target side each number plus 10,
    as a tokenizer with one model per side (`MarianTokenizer`) differs."""

    def tokenize_target(self, strings):
        return number_tokenizer(strings) + 10


def test_targets_are_tokenized_by_the_target_side():
    pairs = text_pairs_from_lists(["5 6 7"], ["8 9"])
    batches = make_batches(pairs, TwoSidedTokenizer(), 64, max_length=16, shuffle=False)
    ((source, target_in, target_out),) = collect(batches)
    assert strip(source[0]) == (5, 6, 7, EOS_ID)
    assert strip(target_in[0]) == (BOS_ID, 18, 19)
    assert strip(target_out[0]) == (18, 19, EOS_ID)
    assert count_pairs(pairs, TwoSidedTokenizer()).kept == 1


def test_other_special_ids_frame_and_pad():
    pairs = text_pairs_from_lists(["5 6 7", "8"], ["9 10", "11 12 13"])

    class OtherIds(Numbers):
        bos_id, eos_id, pad_id = 1, 2, 3

    (batch,) = collect(make_batches(pairs, OtherIds(), 64, 16, shuffle=False))
    source, target_in, target_out = batch
    assert source.tolist() == [[5, 6, 7, 2], [8, 2, 3, 3]]
    assert target_in.tolist() == [[1, 9, 10, 3], [1, 11, 12, 13]]
    assert target_out.tolist() == [[9, 10, 2, 3], [11, 12, 13, 2]]


def test_truncate_keeps_long_pairs():
    long = " ".join(["5"] * 30)
    batches = collect(
        make_batches(
            text_pairs_from_lists([long, "4"], [long, "6"]),
            number_tokenizer,
            64,
            max_length=10,
            long_pairs="truncate",
            shuffle=False,
        )
    )
    rows = [strip(s) for source, _, _ in batches for s in source]
    assert sorted(len(r) for r in rows) == [2, 10]
    assert (5,) * 9 + (EOS_ID,) in rows
    dropped = collect(
        make_batches(
            text_pairs_from_lists([long, "4"], [long, "6"]),
            number_tokenizer,
            64,
            max_length=10,
            shuffle=False,
        )
    )
    assert sum(len(s) for s, _, _ in dropped) == 1


def test_repeated_passes_fill_every_batch_and_cover_the_pairs_evenly():
    sources, targets = reversal_corpus(300, vocab=50, min_len=1, max_len=30)
    pairs = text_pairs_from_lists(sources, targets)
    budget, max_length = 120, 32
    edges = bucket_boundaries(max_length, growth=1.05)  # make_batches' default

    def bucket(source, target_in):  # the upper edge of the batch's bucket
        longest = max(np.count_nonzero(source, 1).max(), np.count_nonzero(target_in, 1).max())
        return min(e for e in edges if e > longest)

    def full_size(source, target_in):
        return budget // (bucket(source, target_in) - 1)

    one_pass = collect(make_batches(pairs, number_tokenizer, budget, max_length, seed=1))
    assert sum(len(s) for s, _, _ in one_pass) == 300
    assert any(len(s) < full_size(s, ti) for s, ti, _ in one_pass)  # each bucket's last batch
    repeated = make_batches(
        pairs, number_tokenizer, budget, max_length, seed=1, repeat=True, bucket_by="longer_side"
    )
    batches = collect(repeated, take=8 * len(one_pass))
    assert all(len(s) == full_size(s, ti) for s, ti, _ in batches)
    seen = collections.Counter(strip(r) for s, _, _ in batches for r in s)
    assert set(seen) == {strip(r) for s, _, _ in one_pass for r in s}
    # Unshuffled, every pass enters in order: a pair of a bucket comes out
    # once per pass, as often as the others of its bucket (give or take one).
    in_order = make_batches(
        pairs,
        number_tokenizer,
        budget,
        max_length,
        shuffle=False,
        repeat=True,
        bucket_by="longer_side",
    )
    batches = collect(in_order, take=8 * len(one_pass))
    assert all(len(s) == full_size(s, ti) for s, ti, _ in batches)
    by_bucket = collections.defaultdict(collections.Counter)
    for s, ti, _ in batches:
        for row in s:
            by_bucket[bucket(s, ti)][strip(row)] += 1
    assert sum(len(seen) for seen in by_bucket.values()) == 300
    assert all(max(c.values()) - min(c.values()) <= 1 for c in by_bucket.values())


def unrelated_lengths_corpus(n, max_len, seed=0):
    """Sources and targets of 1 to `max_len` ids each, lengths drawn apart."""
    rng = np.random.default_rng(seed)

    def sentence():
        return " ".join(map(str, rng.integers(4, 50, rng.integers(1, max_len + 1))))

    return [sentence() for _ in range(n)], [sentence() for _ in range(n)]


def lengths(batch):
    return np.count_nonzero(batch, axis=1)


def test_each_side_buckets_fill_every_batch_from_both_sides_and_cover_the_pairs_evenly():
    pairs = text_pairs_from_lists(*unrelated_lengths_corpus(300, max_len=30))
    budget, max_length = 120, 32
    edges = np.array(bucket_boundaries(max_length, growth=1.05))  # make_batches' default

    def bucket(length):  # the upper edge of the bucket holding `length`
        return edges[edges > length].min()

    def full_size(source, target_in):
        longest = max(bucket(lengths(source).max()), bucket(lengths(target_in).max())) - 1
        return budget // longest

    def check(batches):
        for source, target_in, _ in batches:
            # No row pads beyond its own bucket, on either side.
            assert len({bucket(n) for n in lengths(source)}) == 1
            assert len({bucket(n) for n in lengths(target_in)}) == 1
            assert len(source) == full_size(source, target_in)

    one_pass = collect(
        make_batches(pairs, number_tokenizer, budget, max_length, seed=1, bucket_by="each_side")
    )
    assert sum(len(s) for s, _, _ in one_pass) == 300
    assert any(len(s) < full_size(s, ti) for s, ti, _ in one_pass)  # a bucket's last batch
    repeated = make_batches(pairs, number_tokenizer, budget, max_length, seed=1, repeat=True)
    batches = collect(repeated, take=8 * len(one_pass))  # "auto": each side under repeat
    check(batches)
    seen = {strip(r) for s, _, _ in batches for r in s}
    assert seen == {strip(r) for s, _, _ in one_pass for r in s}
    # Unshuffled, a pair comes out as often as the others of its buckets.
    in_order = make_batches(pairs, number_tokenizer, budget, max_length, shuffle=False, repeat=True)
    batches = collect(in_order, take=8 * len(one_pass))
    check(batches)
    by_bucket = collections.defaultdict(collections.Counter)
    for s, ti, _ in batches:
        for row in s:
            by_bucket[bucket(lengths(s).max()), bucket(lengths(ti).max())][strip(row)] += 1
    assert sum(len(seen) for seen in by_bucket.values()) == 300
    assert all(max(c.values()) - min(c.values()) <= 1 for c in by_bucket.values())


def test_each_side_buckets_pad_less_than_the_longer_side():
    pairs = text_pairs_from_lists(*unrelated_lengths_corpus(2000, max_len=60))

    def padding(bucket_by):
        batches = collect(make_batches(pairs, number_tokenizer, 2000, bucket_by=bucket_by))
        rows = sorted(strip(r) for s, _, _ in batches for r in s)
        return rows, [
            1 - sum(np.count_nonzero(b[side]) for b in batches) / sum(b[side].size for b in batches)
            for side in (0, 1)
        ]

    rows, (source, target) = padding("each_side")
    longer_rows, (longer_source, longer_target) = padding("longer_side")
    assert rows == longer_rows  # the same pairs, batched differently
    # Lengths drawn apart, uniform in 1-60 (plus EOS or BOS): by the longer
    # side, each side pads to the other's lengths (E[max] / E[side] - 1:
    # about a quarter of its positions); by each side, only within its own
    # 5% bucket (about 2%).
    assert max(source, target) < 0.05 < 0.2 < min(longer_source, longer_target)


def test_seeded_shuffle_is_reproducible_and_reshuffles_each_pass():
    sources, targets = reversal_corpus(200)

    def make():
        pairs = text_pairs_from_lists(sources, targets)
        return make_batches(pairs, number_tokenizer, 100, max_length=16, seed=5)

    def rows(batches):
        return [strip(r) for s, _, _ in batches for r in s]

    dataset = make()
    first, second = rows(collect(dataset)), rows(collect(dataset))
    assert rows(collect(make())) == first  # same seed, same order
    assert second != first and sorted(second) == sorted(first)  # a new order per pass


def test_cached_ids_tokenize_once_and_still_reshuffle():
    sources, targets = reversal_corpus(200)
    calls = tf.Variable(0)

    class Counting(Numbers):
        def tokenize(self, text):
            with tf.control_dependencies([calls.assign_add(tf.size(text))]):
                return super().tokenize(text)

    counting_tokenizer = Counting()

    pairs = text_pairs_from_lists(sources, targets)
    cached = make_batches(pairs, counting_tokenizer, 100, max_length=16, seed=5, cache_ids=True)
    plain = make_batches(pairs, number_tokenizer, 100, max_length=16, seed=5)

    def rows(batches):
        return [(strip(s), strip(t)) for b in batches for s, t in zip(b[0], b[2], strict=True)]

    first = rows(collect(cached))
    assert int(calls.numpy()) == 2 * 200  # both sides of every pair, once
    second = rows(collect(cached))
    assert int(calls.numpy()) == 2 * 200  # the second pass reads the cache
    assert second != first and sorted(second) == sorted(first) == sorted(rows(collect(plain)))


def test_finer_buckets_pad_less():
    sources, targets = reversal_corpus(2000, min_len=1, max_len=60)
    pairs = text_pairs_from_lists(sources, targets)

    def padding(growth):
        batches = collect(make_batches(pairs, number_tokenizer, 2000, bucket_growth=growth))
        return 1 - sum(np.count_nonzero(s) for s, _, _ in batches) / sum(
            s.size for s, _, _ in batches
        )

    coarse, fine = padding(1.3), padding(1.05)
    # Lengths are uniform, so a bucket [a, g*a) pads about (g - 1) / 2 of a
    # batch on average: about 12% at 1.3, about 2% at 1.05.
    assert fine < 0.04 < 0.08 < coarse < 0.16


def test_local_files_plain_and_gzip(tmp_path):
    sources, targets = reversal_corpus(20)
    (tmp_path / "a.src").write_text("\n".join(sources) + "\n")
    with gzip.open(tmp_path / "a.tgt.gz", "wt") as f:
        f.write("\n".join(targets) + "\n")
    pairs = list(
        text_pairs_from_files(tmp_path / "a.src", tmp_path / "a.tgt.gz").as_numpy_iterator()
    )
    assert [(s.decode(), t.decode()) for s, t in pairs] == list(zip(sources, targets, strict=True))
    (tmp_path / "short.tgt").write_text("\n".join(targets[:5]) + "\n")
    with pytest.raises(ValueError, match="same number of lines"):
        text_pairs_from_files(tmp_path / "a.src", tmp_path / "short.tgt")


def test_tfds_source_offline():
    with tfds.testing.mock_data(num_examples=12):
        pairs = text_pairs_from_tfds("wmt14_translate/de-en", "train", "en", "de")
        batches = collect(
            make_batches(pairs, byte_tokenizer, batch_tokens=2048, max_length=128, shuffle=False)
        )
    assert sum(len(s) for s, _, _ in batches) == 12


def test_input_context_shards_and_splits_the_budget():
    sources, targets = reversal_corpus(400)
    pairs = text_pairs_from_lists(sources, targets)
    rows = collections.Counter()
    for pipeline in range(2):
        context = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=pipeline, num_replicas_in_sync=4
        )
        for source, _, _ in collect(
            make_batches(pairs, number_tokenizer, 400, max_length=16, input_context=context)
        ):
            assert source.size <= 100  # 400 tokens over 4 replicas
            rows.update(strip(s) for s in source)
    assert sum(rows.values()) == 400


def test_vocab_check_in_the_pipeline():
    dataset = make_batches(
        text_pairs_from_lists(["5 99"], ["6"]), number_tokenizer, 64, max_length=16, vocab_size=50
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="vocab_size=50"):
        collect(dataset)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(batch_tokens=0), "batch_tokens"),
        (dict(batch_tokens=8, max_length=16), "batch_tokens"),
        (dict(long_pairs="clip"), "long_pairs"),
        (dict(max_length=1), "max_length"),
        (dict(cache_ids="yes"), "cache_ids"),
        (dict(bucket_growth=1.0), "growth"),
        (dict(bucket_by="shorter_side"), "bucket_by"),
    ],
)
def test_bad_arguments(kwargs, name):
    arguments = {"batch_tokens": 64, "max_length": 16, **kwargs}
    with pytest.raises(ValueError, match=f"{name}="):
        make_batches(text_pairs_from_lists(["1"], ["2"]), number_tokenizer, **arguments)
    with pytest.raises(ValueError, match="same length"):
        text_pairs_from_lists(["a"], [])


def test_bucket_boundaries_cover_max_length():
    edges = bucket_boundaries(256)
    assert edges[0] == 8 and edges[-1] == 257
    assert all(b > a for a, b in zip(edges, edges[1:], strict=False))
    assert all(b <= int(a * 1.1) + 1 for a, b in zip(edges[:-2], edges[1:-1], strict=True))


def test_pairs_with_an_empty_side_are_dropped_and_counted():
    sources = ["5 6", "", "7 8 9", "4", "  "]
    targets = ["6 5", "9", "", "4", "5"]
    pairs = text_pairs_from_lists(sources, targets)
    batches = make_batches(pairs, number_tokenizer, 64, max_length=3, shuffle=False)
    rows = [strip(s) for source, _, _ in collect(batches) for s in source]
    assert sorted(rows) == [(4, EOS_ID), (5, 6, EOS_ID)]
    counts = batches.pair_counts()
    assert (counts.read, counts.kept, counts.empty, counts.too_long) == (5, 2, 3, 0)
    assert count_pairs(pairs, number_tokenizer, max_length=2) == PairCounts(5, 1, 3, 1)
    assert str(counts).startswith("5 pairs read, 2 kept, 3 dropped for an empty side")


def test_subword_sampling_resegments_each_pass_and_keeps_the_text():
    from keras_transformer.tokenization import train_sentencepiece

    sources, targets = reversal_corpus(30, seed=3)
    sources = [s.replace(" ", "") + " abc" for s in sources]  # words worth splitting
    tokenizer = train_sentencepiece(sources + targets, 300)
    pairs = text_pairs_from_lists(sources, targets)
    batches = make_batches(pairs, tokenizer, 4096, shuffle=False, sampling_alpha=0.5)
    passes = [collect(batches) for _ in range(3)]
    texts = [
        sorted(t for b in p for t in tokenizer.detokenize(b[0]).numpy().tolist()) for p in passes
    ]
    assert texts[0] == texts[1] == texts[2] == sorted(s.encode() for s in sources)
    assert len({str([b[0].tolist() for b in p]) for p in passes}) > 1
    plain = make_batches(pairs, tokenizer, 4096, shuffle=False)
    assert str(collect(plain)) == str(collect(plain))


@pytest.mark.parametrize("alpha, tokenizer", [(0.0, None), (1.5, None), (0.1, number_tokenizer)])
def test_bad_sampling_alpha(alpha, tokenizer):
    from keras_transformer.tokenization import train_sentencepiece

    sources, targets = reversal_corpus(10, seed=3)
    tokenizer = tokenizer or train_sentencepiece(sources + targets, 300)
    with pytest.raises(ValueError, match="sampling_alpha"):
        make_batches(text_pairs_from_lists(sources, targets), tokenizer, 4096, sampling_alpha=alpha)


def test_cached_ids_refuse_subword_sampling():
    from keras_transformer.tokenization import train_sentencepiece

    sources, targets = reversal_corpus(10, seed=3)
    tokenizer = train_sentencepiece(sources + targets, 300)
    pairs = text_pairs_from_lists(sources, targets)
    with pytest.raises(ValueError, match="cache_ids=True, sampling_alpha=0.1"):
        make_batches(pairs, tokenizer, 4096, sampling_alpha=0.1, cache_ids=True)

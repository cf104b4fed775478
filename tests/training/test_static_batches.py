"""`make_batches(static_shapes=True)`: a few shapes, fitted to the corpus,
every pair once per pass, the padding rows and positions the loss ignores."""

import collections

import numpy as np
import pytest

from keras_transformer.special_ids import BOS_ID
from keras_transformer.special_ids import EOS_ID
from keras_transformer.training import BatchShapes
from keras_transformer.training import checkpoints
from keras_transformer.training import data
from keras_transformer.training import make_batches
from keras_transformer.training import shape_sample
from keras_transformer.training import text_pairs_from_lists
from keras_transformer.training.data import fit_batch_shapes
from tests.training.helpers import number_tokenizer

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design


def long_tailed_corpus(n, seed=0, max_len=60):
    """Pairs of 1 to `max_len` numbers, most short (lengths drawn from a
    log-normal, as a news corpus's), the target one longer or shorter."""
    rng = np.random.default_rng(seed)
    sources, targets = [], []
    for _ in range(n):
        length = int(np.clip(rng.lognormal(np.log(8), 0.6), 1, max_len))
        ids = rng.integers(4, 50, length)
        extra = rng.integers(4, 50, rng.integers(0, 3))
        sources.append(" ".join(map(str, ids)))
        targets.append(" ".join(map(str, [*ids[::-1], *extra])))
    return sources, targets


def rows(batches, take=None):
    """Every batch of `make_batches`' (or the first `take`) as NumPy
    `(source, target_in, target_out)`."""
    dataset = batches.dataset if take is None else batches.dataset.take(take)
    return [(s.numpy(), ti.numpy(), to.numpy()) for (s, ti), to in dataset]


def real(row):
    return tuple(int(x) for x in row if x != 0)


MAX_LENGTH = 48


@pytest.fixture(scope="module")
def corpus():
    return long_tailed_corpus(1500)


def test_every_batch_has_a_fitted_shape_and_every_pair_comes_once(corpus):
    sources, targets = corpus
    pairs = text_pairs_from_lists(sources, targets)
    batches = make_batches(
        pairs, number_tokenizer, 512, MAX_LENGTH, seed=0, static_shapes=True, max_shapes=6
    )
    shapes = batches.shapes
    assert len(shapes.lengths) == 6 and shapes.lengths[-1] == MAX_LENGTH
    seen, used = collections.Counter(), set()
    for source, target_in, target_out in rows(batches):
        assert source.shape == target_in.shape == target_out.shape
        assert source.shape in shapes.shapes
        used.add(source.shape)
        for s, ti, to in zip(source, target_in, target_out, strict=True):
            if not real(s):  # a row that completes a part-filled batch
                assert not real(ti) and not real(to)
                continue
            # The pair's bucket is the first length that holds its longer side.
            longer = max(len(real(s)), len(real(ti)))
            assert source.shape[1] == min(n for n in shapes.lengths if n >= longer)
            assert real(ti)[0] == BOS_ID and real(to)[-1] == EOS_ID
            seen[real(s)[:-1], real(to)[:-1]] += 1
    expected = collections.Counter(
        (tuple(int(x) for x in s.split()), tuple(int(x) for x in t.split()))
        for s, t in zip(sources, targets, strict=True)
        if max(len(s.split()), len(t.split())) + 1 <= MAX_LENGTH
    )
    assert seen == expected
    assert len(used) == 6  # the long tail reaches every bucket


def test_the_shapes_are_fitted_to_the_lengths_as_make_batches_frames_them(corpus):
    sources, targets = corpus
    pairs = text_pairs_from_lists(sources, targets)
    fitted = fit_batch_shapes(pairs, number_tokenizer, 512, MAX_LENGTH, max_shapes=6)
    source = np.array([len(s.split()) + 1 for s in sources])
    target = np.array([len(t.split()) + 1 for t in targets])
    kept = np.maximum(source, target) <= MAX_LENGTH
    assert kept.sum() < len(sources)  # the tail drops pairs
    whole = "all 1,500 pairs of the corpus"  # how the sample was drawn
    assert fitted == BatchShapes.fit(source[kept], target[kept], 512, MAX_LENGTH, 6, whole)
    # Truncated pairs count with max_length.
    truncated = fit_batch_shapes(pairs, number_tokenizer, 512, MAX_LENGTH, "truncate", 6)
    clipped = np.minimum(source, MAX_LENGTH), np.minimum(target, MAX_LENGTH)
    assert truncated == BatchShapes.fit(*clipped, 512, MAX_LENGTH, 6, whole)


def test_repeated_passes_fill_every_batch_with_real_pairs(corpus):
    pairs = text_pairs_from_lists(*corpus)
    batches = make_batches(
        pairs, number_tokenizer, 512, MAX_LENGTH, seed=1, repeat=True, static_shapes=True
    )
    shapes = batches.shapes
    measured = rows(batches, take=300)
    assert all(all(real(s) for s in source) for source, _, _ in measured)
    assert {source.shape for source, _, _ in measured} <= set(shapes.shapes)
    # The fit's estimate of the real target tokens per batch holds.
    tokens = np.mean([np.count_nonzero(to) for _, _, to in measured])
    assert tokens == pytest.approx(shapes.target_tokens_per_batch, rel=0.05)


def test_each_replica_gets_the_same_lengths_and_its_share_of_the_budget(corpus, monkeypatch):
    import tensorflow as tf

    pairs = text_pairs_from_lists(*corpus)
    samples = []
    sample = shape_sample._lengths_of_sample
    monkeypatch.setattr(
        shape_sample, "_lengths_of_sample", lambda *a: samples.append(a) or sample(*a)
    )
    whole = make_batches(pairs, number_tokenizer, 1024, MAX_LENGTH, static_shapes=True)
    context = tf.distribute.InputContext(
        num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=2
    )
    replica = make_batches(
        pairs, number_tokenizer, 1024, MAX_LENGTH, input_context=context, static_shapes=True
    )
    assert replica.shapes.lengths == whole.shapes.lengths
    assert replica.shapes.batch_sizes == tuple(512 // n for n in whole.shapes.lengths)
    assert {s.shape for s, _, _ in rows(replica)} <= set(replica.shapes.shapes)
    assert len(samples) == 1  # the replicas' pipelines fit on one sample, tokenized once


def test_auto_is_static_where_the_step_is_compiled_by_xla(corpus, monkeypatch):
    pairs = text_pairs_from_lists(*corpus)
    assert make_batches(pairs, number_tokenizer, 512, MAX_LENGTH).shapes is None
    monkeypatch.setattr(data, "recommended_jit_compile", lambda: True)  # as on a GPU
    assert make_batches(pairs, number_tokenizer, 512, MAX_LENGTH).shapes is not None


@pytest.mark.parametrize(
    "arguments, name",
    [
        (dict(static_shapes="yes"), "static_shapes"),
        (dict(static_shapes=True, max_shapes=0), "max_shapes"),
        (dict(static_shapes=True, bucket_by="each_side"), "bucket_by"),
        (dict(static_shapes=True, bucket_growth=1.2), "bucket_growth"),
    ],
)
def test_bad_arguments(arguments, name):
    pairs = text_pairs_from_lists(["4 5"], ["6 7"])
    with pytest.raises(ValueError, match=name):
        make_batches(pairs, number_tokenizer, 64, 16, **arguments)


def test_a_run_records_its_batch_shapes(corpus, tmp_path):
    import json

    from tests.micro import micro_model
    from tests.training.helpers import train_quietly

    pairs = text_pairs_from_lists(*corpus)

    def batches(input_context, static_shapes=True):  # as examples/wmt_ende.py builds them
        return make_batches(
            pairs,
            number_tokenizer,
            256,
            MAX_LENGTH,
            input_context=input_context,
            repeat=True,
            static_shapes=static_shapes,
        )

    model = micro_model(vocab_size=50)
    result = train_quietly(tmp_path, 2, model, batches, steps_per_checkpoint=2)
    expected = fit_batch_shapes(pairs, number_tokenizer, 256, MAX_LENGTH)
    assert result.batch_shapes == expected
    with open(tmp_path / "checkpoints" / "run.json") as f:
        assert json.load(f)["batch_shapes"] == expected.to_json()
    # A resumed run with dynamic shapes says so.
    checkpoints.check_run(tmp_path, model, result.settings, batch_shapes=None)
    with open(tmp_path / "checkpoints" / "run.json") as f:
        assert json.load(f)["batch_shapes"] is None


def test_the_shapes_are_fitted_to_the_whole_corpus_not_its_start(monkeypatch):
    """The shapes were fitted to the first `SHAPE_SAMPLE` pairs in file
    order: a corpus of concatenated subcorpora got shapes for its first
    one, and the longer pairs after it were padded to `max_length`."""
    monkeypatch.setattr(shape_sample, "SHAPE_SAMPLE", 300)
    short = [" ".join(["5"] * 4)] * 600  # a first subcorpus of short pairs
    long = [" ".join(["7"] * 30)] * 300  # then one of long ones
    pairs = text_pairs_from_lists(short + long, short + long)
    shapes = fit_batch_shapes(pairs, number_tokenizer, 512, MAX_LENGTH, max_shapes=4)
    assert 31 in shapes.lengths  # the long pairs' own length (30 numbers and EOS or BOS)
    assert shapes.pairs == 300 and shapes.sample == "one pair in every 3 of the corpus's 900"
    assert "(measured on 300 pairs: one pair in every 3 of the corpus's 900)" in str(shapes)
    whole = fit_batch_shapes(text_pairs_from_lists(short, short), number_tokenizer, 512, 48)
    assert whole.sample == "one pair in every 2 of the corpus's 600" and whole.pairs == 300

"""training.mix_corpora: each corpus's sources tagged as the runners tag a
request, drawn by temperature sampling (`p ∝ size^(1/T)`, checked against
the formula and by counting draws), one pass of `sum(sizes)` pairs, and
batched by `make_batches` like one corpus."""

import collections

import numpy as np
import pytest

from keras_transformer import training
from keras_transformer.training.multilingual import mixing_weights
from keras_transformer.training.multilingual import tagged_pairs
from keras_transformer_runtime.text.languages import TargetLanguages
from tests.tokenization.test_language_tags import TAGS

pytestmark = pytest.mark.tensorflow_only  # tf.data

SIZES = {"de": 600, "fr": 150, "cs": 30}


def corpora(sizes=SIZES):
    return {
        code: training.text_pairs_from_lists(
            [f"{code} source {i}" for i in range(size)], [f"{code} target {i}" for i in range(size)]
        )
        for code, size in sizes.items()
    }


def test_the_weights_follow_the_temperature_formula():
    for temperature in (1, 2, 5, 100):
        scaled = {c: n ** (1 / temperature) for c, n in SIZES.items()}
        expected = {c: v / sum(scaled.values()) for c, v in scaled.items()}
        assert mixing_weights(SIZES, temperature) == pytest.approx(expected)
    assert mixing_weights(SIZES, 1) == pytest.approx({"de": 600 / 780, "fr": 150 / 780,
                                                               "cs": 30 / 780})  # fmt: skip
    flat = mixing_weights(SIZES, 1e9)
    assert flat == pytest.approx({c: 1 / 3 for c in SIZES})


def test_sources_are_tagged_as_the_runners_tag_a_request():
    pairs = tagged_pairs(corpora()["fr"].take(2), "fr")
    found = [(s.decode(), t.decode()) for s, t in pairs.as_numpy_iterator()]
    tagged = TargetLanguages(("fr",)).tagged
    assert found == [(tagged("fr source 0", "fr"), "fr target 0"),
                     (tagged("fr source 1", "fr"), "fr target 1")]  # fmt: skip


def test_draws_follow_the_weights_and_a_pass_is_the_corpora_size():
    mixed = training.mix_corpora(corpora(), SIZES, temperature=2, seed=1)
    counts = collections.Counter()
    for _ in range(5):  # passes
        pairs = list(mixed.pairs.as_numpy_iterator())
        assert len(pairs) == sum(SIZES.values())
        for source, target in pairs:
            code = target.decode().split()[0]
            assert source.decode().startswith(f">>{code}<< {code} source ")
            counts[code] += 1
    total = sum(counts.values())
    for code, weight in mixed.weights.items():
        share = counts[code] / total
        assert share == pytest.approx(weight, abs=4 * np.sqrt(weight * (1 - weight) / total))
    # The small corpus is drawn more than its share of the pairs: repeated.
    assert counts["cs"] / 5 > SIZES["cs"]


def test_the_mixture_batches_like_one_corpus():
    tokenizer = training_tokenizer()
    mixed = training.mix_corpora(corpora(), SIZES, temperature=5, seed=0)
    batches = training.make_batches(mixed, tokenizer, batch_tokens=256, shuffle=False)
    tags = {tokenizer.piece_to_id(tag) for tag in TAGS}
    rows = 0
    assert batches.mixing_weights == mixed.weights  # carried to the batches
    for (source, _), _ in batches.dataset:
        firsts = source.numpy()[:, :2]  # "▁", then the tag
        assert all(tags & set(row) for row in firsts.tolist())
        rows += source.shape[0]
    assert rows == sum(SIZES.values())


def training_tokenizer():
    from keras_transformer.tokenization import train_sentencepiece

    texts = [f"{code} source {i} {code} target {i}" for code in SIZES for i in range(40)]
    return train_sentencepiece(texts, vocab_size=300, user_defined_symbols=TAGS)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(sizes={"de": 600, "fr": 150}), "same languages"),
        (dict(temperature=0), "temperature"),
        (dict(temperature=True), "temperature"),
        (dict(sizes={**SIZES, "cs": 0}), r"sizes\['cs'\]"),
        (dict(corpora={}), "at least one"),
    ],
)
def test_bad_arguments_are_refused(arguments, message):
    with pytest.raises(ValueError, match=message):
        training.mix_corpora(**{"corpora": corpora(), "sizes": SIZES, **arguments})

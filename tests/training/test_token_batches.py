"""`TokenBatches`: batches that carry their own facts, read once by a run."""

import json

import pytest
import tensorflow as tf

from keras_transformer import training
from tests.micro import micro_model
from tests.training.helpers import number_tokenizer
from tests.training.helpers import reversal_corpus
from tests.training.helpers import train_quietly

pytestmark = pytest.mark.tensorflow_only  # tf.data


def pairs(n=200):
    return training.text_pairs_from_lists(*reversal_corpus(n))


def test_the_facts_ride_on_the_value_not_on_the_dataset():
    batches = training.make_batches(pairs(), number_tokenizer, 256, 16, static_shapes=True)
    assert batches.shapes is not None and batches.tokenizer is number_tokenizer
    assert batches.pair_counts().kept == 200
    mixed = training.mix_corpora({"de": pairs(), "fr": pairs()}, {"de": 200, "fr": 200})
    assert training.make_batches(mixed, number_tokenizer, 256, 16).mixing_weights == mixed.weights
    # Nothing stuck on a tf.data.Dataset, where the next `.map` would lose it.
    for dataset in (batches.dataset, mixed.pairs):
        for name in ("pair_counts", "batch_shapes", "shapes", "mixing_weights"):
            assert name not in vars(dataset)
    with pytest.raises(ValueError, match="`dataset` must be a tf.data.Dataset"):
        training.TokenBatches([1, 2, 3])


def test_the_users_batches_function_is_called_once_per_run(tmp_path):
    calls = []

    def batches(input_context):
        calls.append(input_context)
        return training.make_batches(
            pairs(),
            number_tokenizer,
            256,
            16,
            input_context=input_context,
            repeat=True,
            static_shapes=True,
        )

    result = train_quietly(tmp_path, 2, micro_model(), batches, steps_per_checkpoint=2)
    assert len(calls) == 1  # not again for the shapes, nor for the record
    with open(tmp_path / "checkpoints" / "run.json") as f:
        assert json.load(f)["batch_shapes"] == result.batch_shapes.to_json()
    assert result.batch_shapes is not None


def test_a_function_that_gives_no_batch_says_why_without_a_second_call(tmp_path):
    calls = []

    def batches(input_context):
        calls.append(input_context)
        return training.make_batches(pairs(20), number_tokenizer, 64, max_length=3)

    with pytest.raises(training.NoTrainingDataError, match="20 pairs read, 0 kept"):
        train_quietly(tmp_path, 2, micro_model(), batches, steps_per_checkpoint=2)
    assert len(calls) == 1


def test_batches_of_another_kind_are_refused(tmp_path):
    with pytest.raises(ValueError, match="`batches` must be a TokenBatches"):
        train_quietly(tmp_path, 2, micro_model(), [1, 2], steps_per_checkpoint=2)
    with pytest.raises(ValueError, match="must return a TokenBatches"):
        train_quietly(tmp_path, 2, micro_model(), lambda context: [1, 2])
    plain = tf.data.Dataset.from_tensors(
        ((tf.ones((2, 3), "int32"),) * 2, tf.ones((2, 3), "int32"))
    )
    result = train_quietly(tmp_path / "plain", 2, micro_model(), plain, steps_per_checkpoint=2)
    assert result.final_step == 2 and result.batch_shapes is None

"""Restoring training checkpoints: today's, and those keras_transformer 0.1
wrote (attention kernels `(d_model, heads * depth)`; tests/fixtures/
former_layout) into today's `(d_model, heads, depth)`, optimizer moments
included."""

import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer
from keras_transformer.training import average_checkpoints
from keras_transformer.training.checkpoints import training_checkpoint
from keras_transformer.training.restoring import restore_checkpoint
from tests.test_case import assert_close
from tests.test_case import numpy

pytestmark = pytest.mark.tensorflow_only  # tf.train checkpoints

FORMER = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "former_layout"


def _former_model():
    """The fixture's architecture, built, with Adam's variables."""
    model = Transformer(
        vocab_size=20, num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout=0.0, max_length=16
    )
    model.build(((None, None), (None, None)))
    optimizer = keras.optimizers.Adam(1e-2)
    optimizer.build(model.trainable_variables)
    return model, optimizer


def test_a_former_checkpoint_resumes_with_its_weights_moments_and_step():
    expected = np.load(FORMER / "transformer_outputs.npz")
    model, optimizer = _former_model()
    step = tf.Variable(0, dtype=tf.int64)
    restore_checkpoint(training_checkpoint(model, optimizer, step), str(FORMER / "ckpt-1"))
    assert_close(model((expected["source"], expected["target"])), expected["logits"], atol=1e-5)
    moments = next(v for v in optimizer.variables if "query" in v.path and "kernel" in v.path)
    assert tuple(moments.shape) == (16, 2, 8)
    assert_close(moments, expected["moments"].reshape(16, 2, 8), atol=0)
    assert int(step.numpy()) == 1


def test_a_former_checkpoint_averages():
    expected = np.load(FORMER / "transformer_outputs.npz")
    model, _ = _former_model()
    average_checkpoints(model, [str(FORMER / "ckpt-1")] * 2)
    assert_close(model((expected["source"], expected["target"])), expected["logits"], atol=1e-5)


def test_today_s_checkpoints_round_trip_and_another_model_s_are_refused(tmp_path):
    model, optimizer = _former_model()
    checkpoint = training_checkpoint(model, optimizer)
    checkpoint.save_counter  # noqa: B018 (created on access, as a manager's save does)
    path = checkpoint.write(str(tmp_path / "ckpt"))
    copy, copy_optimizer = _former_model()
    restore_checkpoint(training_checkpoint(copy, copy_optimizer), path)
    for ours, theirs in zip(copy.weights, model.weights, strict=True):
        assert_close(ours, numpy(theirs), atol=0)
    wider = Transformer(vocab_size=20, num_layers=1, d_model=16, num_heads=2, d_ff=64)
    wider.build(((None, None), (None, None)))
    with pytest.raises((ValueError, tf.errors.OpError, AssertionError)):
        restore_checkpoint(training_checkpoint(wider), path)

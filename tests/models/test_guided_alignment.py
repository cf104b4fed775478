"""Guided alignment training: the loss against its formula, the model's
call with an alignment, the heads it trains, and training that moves them."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import Transformer
from keras_transformer.models import guided_alignment_loss
from keras_transformer.training import LabelSmoothedCrossEntropy
from tests.test_case import assert_close
from tests.test_case import numpy

VOCAB = 40
RNG = np.random.default_rng(3)


def tiny(**overrides):
    return Transformer.from_preset("tiny", **{"vocab_size": VOCAB, "dropout": 0.0, **overrides})


def reference_loss(alignment, attention):
    """Garg et al.'s eq. 4, one row at a time."""
    total, rows = 0.0, 0
    for a_row, p_row in zip(alignment.reshape(-1, alignment.shape[-1]),
                            attention.reshape(-1, attention.shape[-1]), strict=True):  # fmt: skip
        if a_row.sum() == 0:
            continue
        total -= sum(a / a_row.sum() * np.log(p) for a, p in zip(a_row, p_row, strict=True) if a)
        rows += 1
    return total / max(rows, 1)


def test_the_loss_is_the_cross_entropy_of_the_aligned_rows():
    alignment = (RNG.random((2, 5, 6)) < 0.3).astype("float32")
    alignment[0, 1] = 0  # an unaligned token counts for nothing
    alignment[1, 4] = 0
    logits = RNG.normal(size=(2, 5, 6))
    attention = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    loss = guided_alignment_loss(alignment, attention)
    assert_close(loss, reference_loss(alignment, attention), atol=1e-5)
    assert float(guided_alignment_loss(np.zeros_like(alignment), attention)) == 0.0


def batch():
    source = RNG.integers(3, VOCAB, size=(3, 7))
    source[1, 5:] = 0
    target = RNG.integers(3, VOCAB, size=(3, 5))
    alignment = np.zeros((3, 5, 7), "float32")
    for row, target_len, source_len in ((0, 5, 7), (1, 5, 5), (2, 5, 7)):
        for t in range(target_len):
            alignment[row, t, (t * 2 + row) % source_len] = 1
    return source, target, alignment


@pytest.mark.parametrize("layer, heads", [(-1, None), (0, 1), (1, 3)])
def test_call_with_an_alignment_adds_its_loss_for_the_alignment_heads(layer, heads):
    """The logits are the plain call's; the model's loss is the weight times
    the loss of the mean of the first `alignment_heads` heads of
    `alignment_layer`'s cross-attention."""
    model = tiny(alignment_layer=layer, alignment_heads=heads)
    model.compile(guided_alignment_weight=0.3)
    source, target, alignment = batch()
    plain = numpy(model((source, target)))
    guided = numpy(model((source, target, alignment)))
    assert_close(guided, plain, atol=1e-5)
    _, scores = model.logits_and_attention(source, target)
    mean = numpy(scores[layer]["cross_attention"])[:, : heads or None].mean(axis=1)
    (added,) = model.losses
    assert_close(added, 0.3 * reference_loss(alignment, mean), atol=1e-5)
    assert model.compute_output_shape(((3, 7), (3, 5), (3, 5, 7))) == (3, 5, VOCAB)


def test_training_moves_the_alignment_head_towards_the_alignment():
    """Trained with the guided loss, the alignment head's attention puts
    most of its mass on the aligned source tokens; trained without it, it
    does not."""
    source, target, alignment = batch()
    target_out = np.concatenate([target[:, 1:], np.full((3, 1), 2)], axis=1)

    def aligned_mass(weight):
        keras.utils.set_random_seed(0)
        model = tiny(alignment_heads=1, alignment_layer=0)
        model.compile(
            optimizer=keras.optimizers.Adam(3e-3),
            loss=LabelSmoothedCrossEntropy(0.0),
            guided_alignment_weight=weight,
        )
        for _ in range(60):
            model.train_on_batch((source, target, alignment), target_out)
        _, scores = model.logits_and_attention(source, target)
        head = numpy(scores[0]["cross_attention"])[:, 0]
        return float((head * alignment).sum() / alignment.sum())

    guided, unguided = aligned_mass(1.0), aligned_mass(0.0)
    assert guided > 0.8, guided
    assert unguided < 0.5, unguided


def test_the_alignment_settings_are_checked_and_saved(tmp_path):
    with pytest.raises(ValueError, match="alignment_layer=2"):
        tiny(alignment_layer=2)
    with pytest.raises(ValueError, match="alignment_heads=5"):
        tiny(alignment_heads=5)
    with pytest.raises(ValueError, match="guided_alignment_weight"):
        tiny().compile(guided_alignment_weight=-1.0)
    model = tiny(alignment_layer=0, alignment_heads=2)
    model.compile(optimizer="adam", loss=LabelSmoothedCrossEntropy(), guided_alignment_weight=0.2)
    source, target, alignment = batch()
    model.train_on_batch((source, target, alignment), target)
    path = tmp_path / "model.keras"
    model.save(path)
    restored = keras.saving.load_model(path)  # compiled as saved, with no warning
    assert (restored.alignment_layer, restored.alignment_heads) == (0, 2)
    assert restored.compiled and restored.guided_alignment_weight == 0.2
    assert_close(restored((source, target)), model((source, target)), atol=1e-6)
    assert ops.shape(model.alignment_attention(ops.ones((1, 4, 2, 3)))) == (1, 2, 3)

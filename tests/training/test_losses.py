import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer.training import LabelSmoothedCrossEntropy
from keras_transformer.training import MaskedAccuracy
from keras_transformer.training import Perplexity
from keras_transformer.training import TokenCount
from keras_transformer.training._keras_ops_losses import (
    smoothed_token_losses as keras_ops_token_losses,
)
from keras_transformer.training.losses import smoothed_token_losses
from tests.backends import value_and_gradient

RNG = np.random.default_rng(0)
Y = np.array([[5, 2, 7, 0, 0], [1, 3, 0, 0, 0]])  # 0 is padding
LOGITS = RNG.normal(size=(2, 5, 9)).astype("float32")


def hand_loss(y, logits, eps, smoothed=None):
    """-Σ_v q_v log p_v with q = (1 - ε)·one_hot + ε/V (V: the first
    `smoothed` ids), averaged over non-pad."""
    vocab = logits.shape[-1]
    smoothed = smoothed or vocab
    total, count = 0.0, 0
    for b in range(y.shape[0]):
        for t in range(y.shape[1]):
            if y[b, t] == 0:
                continue
            z = logits[b, t].astype(np.float64)
            log_p = z - np.log(np.exp(z - z.max()).sum()) - z.max()
            q = np.where(np.arange(vocab) < smoothed, eps / smoothed, 0.0)
            q[y[b, t]] += 1.0 - eps
            total += -(q * log_p).sum()
            count += 1
    return total / count


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_equals_hand_computation(eps):
    loss = LabelSmoothedCrossEntropy(label_smoothing=eps)
    np.testing.assert_allclose(float(loss(Y, LOGITS)), hand_loss(Y, LOGITS, eps), rtol=1e-5)


def hand_gradient(y, logits, eps, smoothed=None):
    """d loss / d logits = (softmax − q) / count at real tokens, 0 at pads."""
    z = logits.astype(np.float64)
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    vocab = logits.shape[-1]
    smoothed = smoothed or vocab
    q = np.broadcast_to(
        np.where(np.arange(vocab) < smoothed, eps / smoothed, 0.0), logits.shape
    ).copy()
    np.put_along_axis(q, y[..., None], np.take_along_axis(q, y[..., None], -1) + 1.0 - eps, -1)
    real = (y != 0)[..., None]
    return (p - q) * real / real.sum()


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_gradient_equals_hand_gradient(eps):
    loss = LabelSmoothedCrossEntropy(label_smoothing=eps)
    _, grad, _ = value_and_gradient(lambda logits: loss(Y, logits), LOGITS)
    np.testing.assert_allclose(grad, hand_gradient(Y, LOGITS, eps), atol=1e-6)


def test_ids_that_are_never_outputs_are_not_smoothed_over():
    """An imported Marian model's decoder-start id has logit bias −10⁹:
    smoothed over, it made the loss ~ε·10⁹/V (862,073 where the
    cross-entropy was 4.7). Smoothing over the first ids only keeps the
    loss a cross-entropy, and its gradient the hand formula's."""
    logits = LOGITS.copy()
    logits[..., -1] = -1e9  # the last id is never an output
    everything = LabelSmoothedCrossEntropy(label_smoothing=0.1)
    assert float(everything(Y, logits)) > 1e6  # what the bug reported
    loss = LabelSmoothedCrossEntropy(label_smoothing=0.1, smoothed_vocab_size=8)
    value, grad, _ = value_and_gradient(lambda x: loss(Y, x), logits)
    np.testing.assert_allclose(float(value), hand_loss(Y, logits, 0.1, smoothed=8), rtol=1e-5)
    assert float(value) < 10.0
    np.testing.assert_allclose(grad, hand_gradient(Y, logits, 0.1, smoothed=8), atol=1e-6)
    config = loss.get_config()
    assert LabelSmoothedCrossEntropy.from_config(config).smoothed_vocab_size == 8


def test_bfloat16_logits_give_bfloat16_gradient_of_the_same_value():
    loss = LabelSmoothedCrossEntropy()
    value, grad, dtypes = value_and_gradient(lambda logits: loss(Y, logits), LOGITS, "bfloat16")
    assert dtypes == ("float32", "bfloat16")
    rounded = ops.convert_to_numpy(ops.cast(ops.cast(LOGITS, "bfloat16"), "float32"))
    np.testing.assert_allclose(float(value), hand_loss(Y, rounded, 0.1), rtol=1e-5)
    np.testing.assert_allclose(grad, hand_gradient(Y, rounded, 0.1), atol=1e-2 / 8)


def test_confident_and_wrong_logits_stay_finite_and_exact():
    # Logits spread over ±3,000: the reference tokens' probabilities
    # underflow float32 (exp(-6,000)), the log-sum-exp must not.
    logits = (3000.0 * np.tanh(LOGITS)).astype("float32")
    loss = LabelSmoothedCrossEntropy()
    value, grad, _ = value_and_gradient(lambda x: loss(Y, x), logits)
    assert np.isfinite(float(value)) and float(value) > 100.0
    np.testing.assert_allclose(float(value), hand_loss(Y, logits, 0.1), rtol=1e-6)
    np.testing.assert_allclose(grad, hand_gradient(Y, logits, 0.1), atol=1e-6)


@pytest.mark.tensorflow_only
def test_the_other_backends_formula_equals_the_hand_written_gradient():
    """JAX and PyTorch differentiate `keras.ops` formulas; TensorFlow runs
    the hand-written gradient. Both agree (values and gradients)."""
    import tensorflow as tf

    for eps in (0.0, 0.1):
        logits = tf.constant(3.0 * LOGITS)
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(logits)
            fused = smoothed_token_losses(Y, logits, eps)
            automatic = keras_ops_token_losses(Y, logits, eps)
        np.testing.assert_allclose(automatic.numpy(), fused.numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(
            tape.gradient(automatic, logits).numpy(),
            tape.gradient(fused, logits).numpy(),
            atol=1e-6,
        )


@pytest.mark.tensorflow_only
def test_same_value_and_gradient_under_xla_and_no_nested_xla_kernel():
    """A whole step may be XLA-compiled (on a GPU); the loss alone must not
    launch XLA kernels of its own inside an uncompiled graph step: XLA:CPU's
    YNNPACK fusion crashes there at random (a segmentation fault)."""
    import tensorflow as tf

    logits = tf.constant(LOGITS)
    loss = LabelSmoothedCrossEntropy()

    def value_and_grad(logits):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            value = loss(Y, logits)
        return value, tape.gradient(value, logits)

    graph = tf.function(value_and_grad)
    value, grad = graph(logits)
    xla_value, xla_grad = tf.function(value_and_grad, jit_compile=True)(logits)
    np.testing.assert_allclose(float(xla_value), float(value), rtol=1e-6)
    np.testing.assert_allclose(xla_grad.numpy(), grad.numpy(), atol=1e-7)
    definition = graph.get_concrete_function(logits).graph.as_graph_def()
    nodes = [node for function in definition.library.function for node in function.node_def]
    nodes += list(definition.node)
    assert nodes and not [n.name for n in nodes if n.attr["_XlaMustCompile"].b]
    assert not [
        f.signature.name for f in definition.library.function if f.attr["_XlaMustCompile"].b
    ]


def test_pad_positions_contribute_nothing():
    loss = LabelSmoothedCrossEntropy()
    changed = LOGITS.copy()
    changed[Y == 0] = 1000.0 * RNG.normal(size=changed[Y == 0].shape)
    assert float(loss(Y, changed)) == pytest.approx(float(loss(Y, LOGITS)), rel=1e-6)
    # The mean is over the 5 real tokens, not the 10 positions.
    one_real = np.zeros_like(Y)
    one_real[0, 0] = 5
    assert float(loss(one_real, LOGITS)) == pytest.approx(
        hand_loss(one_real, LOGITS, 0.1), rel=1e-5
    )


def test_config_round_trip():
    loss = LabelSmoothedCrossEntropy(label_smoothing=0.2, pad_id=3)
    again = LabelSmoothedCrossEntropy.from_config(loss.get_config())
    assert (again.label_smoothing, again.pad_id) == (0.2, 3)
    with pytest.raises(ValueError, match="Received: label_smoothing=1.0"):
        LabelSmoothedCrossEntropy(label_smoothing=1.0)


def test_metrics_ignore_padding_and_accumulate():
    predicted = LOGITS.argmax(-1)
    real = Y != 0
    accuracy, perplexity, tokens = MaskedAccuracy(), Perplexity(), TokenCount()
    for metric in (accuracy, perplexity, tokens):
        metric.update_state(Y, LOGITS)
        metric.update_state(Y[:1], LOGITS[:1])
    both = np.concatenate([real, real[:1]])
    hits = np.concatenate([(predicted == Y) & real, ((predicted == Y) & real)[:1]])
    assert float(accuracy.result()) == pytest.approx(hits.sum() / both.sum())
    assert float(tokens.result()) == both.sum()
    nll = (5 * hand_loss(Y, LOGITS, 0.0) + 3 * hand_loss(Y[:1], LOGITS[:1], 0.0)) / 8
    assert float(perplexity.result()) == pytest.approx(np.exp(nll), rel=1e-5)
    accuracy.reset_state()
    assert float(accuracy.result()) == 0.0


def test_configs_extend_the_keras_base_configs():
    loss = LabelSmoothedCrossEntropy(0.2, pad_id=3, name="smoothed")
    assert loss.get_config() == {
        "name": "smoothed",
        "label_smoothing": 0.2,
        "pad_id": 3,
        "smoothed_vocab_size": None,
    }
    for cls in (MaskedAccuracy, Perplexity, TokenCount):
        config = cls(pad_id=3, name="m").get_config()
        assert config == {"name": "m", "dtype": "float32", "pad_id": 3}
        again = cls.from_config(config)
        assert (again.name, again.pad_id) == ("m", 3)


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="reads XLA's compiled HLO under JAX")
def test_the_gradient_is_one_pass_over_the_logits():
    """What XLA makes of the loss and its gradient on logits `(batch,
    length, vocab)`: no tensor of their size but the gradient itself (no
    log-probabilities, no softmax, no one-hot kept or written)."""
    import re

    import jax

    batch, length, vocab = 4, 8, 4096
    ids = np.random.default_rng(0).integers(0, vocab, (batch, length))
    logits = np.random.default_rng(1).normal(size=(batch, length, vocab)).astype("float32")
    loss = LabelSmoothedCrossEntropy()
    step = jax.jit(jax.value_and_grad(lambda x: loss(ids, x)))
    text = step.lower(logits).compile().as_text()
    entry = text[text.index("ENTRY") :]
    shapes = rf"(f32|bf16)\[({batch},{length},{vocab}|{batch * length},{vocab})\]"
    written = [
        line
        for line in entry.splitlines()
        if re.match(rf"\s*(ROOT )?%?[\w.\-]+ = {shapes}", line)
        and not re.search(r"= \S+ (parameter|bitcast)\(", line)
    ]
    assert len(written) == 1, written
    _, gradient = step(logits)
    np.testing.assert_allclose(np.asarray(gradient), hand_gradient(ids, logits, 0.1), atol=1e-8)

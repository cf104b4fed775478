import inspect
import os

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import Transformer
from tests.micro import micro_model
from tests.test_case import assert_close
from tests.test_case import dtype
from tests.test_case import numpy

VOCAB = 50
RNG = np.random.default_rng(0)


def batch(batch_size=3, source_len=7, target_len=5):
    source = RNG.integers(3, VOCAB, size=(batch_size, source_len))
    source[1, 4:] = 0  # padding
    target = RNG.integers(3, VOCAB, size=(batch_size, target_len))
    return source, target


def tiny(**overrides):
    return Transformer.from_preset("tiny", **{"vocab_size": VOCAB, **overrides})


def test_logits_shape_and_dtype():
    source, target = batch()
    logits = tiny()((source, target))
    assert tuple(logits.shape) == (3, 5, VOCAB)
    assert dtype(logits) == "float32"


def test_symbolic_call():
    model = tiny()
    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    assert tuple(model((source, target)).shape) == (None, None, VOCAB)


def test_config_rebuilds_the_model():
    model = tiny(tie_embeddings="none", position_encoding="learned", norm_first=True)
    source, target = batch()
    expected = model((source, target))
    rebuilt = Transformer(**model.get_config())
    rebuilt.build()
    rebuilt.set_weights(model.get_weights())
    assert_close(rebuilt((source, target)), expected, atol=0)
    assert rebuilt.get_config() == model.get_config()


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        dict(tie_embeddings="none", position_encoding="learned", norm_first=True),
        dict(
            source_vocab_size=40, target_vocab_size=VOCAB, vocab_size=None, tie_embeddings="target"
        ),
        dict(
            activation="swish",
            output_bias=True,
            scale_embeddings=False,
            position_encoding="sinusoidal_concatenated",
        ),
    ],
)
def test_keras_file_round_trip(tmp_path, overrides):
    model = tiny(**overrides)
    source, target = batch()
    source = np.minimum(source, 39)
    expected = model((source, target))
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, Transformer)
    assert_close(restored((source, target)), expected, atol=0)


def test_source_padding_changes_no_logit():
    model = tiny()
    source, target = batch()
    padded = np.concatenate([source, np.zeros((3, 6), int)], axis=1)
    assert_close(model((padded, target)), model((source, target)), atol=1e-5)


def test_future_targets_do_not_change_earlier_logits():
    model = tiny()
    source, target = batch()
    changed = target.copy()
    changed[:, 3:] = RNG.integers(3, VOCAB, size=(3, 2))
    a = ops.convert_to_numpy(model((source, target)))
    b = ops.convert_to_numpy(model((source, changed)))
    # Targets after t = 2 changed: logits at positions <= 2 must not.
    assert_close(b[:, :3], a[:, :3], atol=1e-5)
    assert not np.allclose(b[:, 3], a[:, 3])


def test_output_bias_is_added_to_every_logit():
    model = tiny(output_bias=True)
    source, target = batch()
    without = ops.convert_to_numpy(model((source, target)))  # the bias starts at zero
    bias = RNG.normal(size=VOCAB).astype("float32")
    model.logits_bias.assign(bias)
    assert_close(model((source, target)), without + bias, atol=1e-5)
    assert model.count_params() == tiny().count_params() + VOCAB


def test_activation_and_embedding_scale_reach_the_layers():
    model = tiny(activation="swish", scale_embeddings=False)
    for layer in model.encoder.stack + model.decoder.stack:
        assert layer.feed_forward.activation is keras.activations.silu
    ids = np.array([[5, 6]])
    embedded = ops.convert_to_numpy(model.source_embedding(ids))
    table = ops.convert_to_numpy(model.source_embedding.embeddings)
    assert_close(embedded[0], table[[5, 6]], atol=0)  # not multiplied by √d_model


@pytest.mark.parametrize("position_encoding", ["sinusoidal", "learned", "sinusoidal_concatenated"])
def test_cached_decoding_equals_full_pass(position_encoding):
    model = tiny(position_encoding=position_encoding, norm_first=True, output_bias=True)
    source, target = batch()
    full = ops.convert_to_numpy(model((source, target)))
    encoder_output = model.encode(source)
    cache = model.init_cache(encoder_output, source != 0, max_length=8)
    for t in range(5):
        logits, cache = model.decode_step(target[:, t : t + 1], cache, t)
        assert dtype(logits) == "float32"
        assert_close(logits[:, 0], full[:, t], atol=1e-4)


def test_a_cache_grown_as_decoding_goes_equals_full_pass():
    """`resize_cache` keeps the positions written so far and adds empty ones:
    a cache grown one position per step gives the full pass's logits, and
    cutting it back keeps exactly its first positions."""
    model = tiny(norm_first=True)
    source, target = batch()
    full = ops.convert_to_numpy(model((source, target)))
    cache = model.init_cache(model.encode(source), source != 0, max_length=0)
    for t in range(5):
        cache["per_hypothesis"] = model.resize_cache(cache["per_hypothesis"], t + 1)
        logits, cache = model.decode_step(target[:, t : t + 1], cache, t)
        assert_close(logits[:, 0], full[:, t], atol=1e-4)
    grown = model.resize_cache(cache["per_hypothesis"], 8)["self_attention"][0]["key"]
    cut = model.resize_cache(cache["per_hypothesis"], 3)["self_attention"][0]["key"]
    written = numpy(cache["per_hypothesis"]["self_attention"][0]["key"])
    assert numpy(grown).shape[2] == 8 and numpy(cut).shape[2] == 3
    np.testing.assert_array_equal(numpy(grown)[:, :, :5], written)
    np.testing.assert_array_equal(numpy(grown)[:, :, 5:], 0.0)
    np.testing.assert_array_equal(numpy(cut), written[:, :, :3])


def test_beams_share_the_per_sentence_cache():
    """Two rows per sentence (the per-hypothesis part repeated, the
    per-sentence part not) give each sentence's full-pass logits."""
    model = tiny(norm_first=True)
    source, target = batch()
    full = ops.convert_to_numpy(model((source, target)))
    cache = model.init_cache(model.encode(source), source != 0, max_length=8)
    assert set(cache) == {"per_hypothesis", "per_sentence"}
    assert set(cache["per_sentence"]) == {"cross_attention", "encoder_padding_mask"}
    cache["per_hypothesis"] = keras.tree.map_structure(
        lambda t: ops.repeat(t, 2, axis=0), cache["per_hypothesis"]
    )
    for t in range(5):
        logits, cache = model.decode_step(np.repeat(target[:, t : t + 1], 2, 0), cache, t)
        assert_close(logits[0::2, 0], full[:, t], atol=1e-4)
        assert_close(logits[1::2, 0], full[:, t], atol=1e-4)


@pytest.mark.parametrize(
    "layer, heads, given", [(0, None, True), (-1, None, True), (0, None, False), (-1, 1, False)]
)
def test_decode_step_writes_the_alignment_of_the_full_pass(layer, heads, given):
    """With `aligned=True`, each step writes the cross-attention of the
    `alignment_layer` given (else the model's) averaged over the model's
    `alignment_heads` first heads, as the full pass computes it, for rows
    that share a sentence's memory and a cache grown step by step; the
    logits are unchanged."""
    model = tiny(norm_first=True, alignment_heads=heads, alignment_layer=0 if given else layer)
    source, target = batch()
    full = ops.convert_to_numpy(model((source, target)))
    _, scores = model.logits_and_attention(source, target)
    expected = np.mean(numpy(scores[layer]["cross_attention"])[:, : heads or None], axis=1)
    cache = model.init_cache(model.encode(source), source != 0, max_length=0, aligned=True)
    cache["per_hypothesis"] = keras.tree.map_structure(
        lambda t: ops.repeat(t, 2, axis=0), cache["per_hypothesis"]
    )
    for t in range(5):
        cache["per_hypothesis"] = model.resize_cache(cache["per_hypothesis"], t + 1)
        rows = np.repeat(target[:, t : t + 1], 2, 0)
        logits, cache = model.decode_step(rows, cache, t, alignment_layer=layer if given else None)
        assert_close(logits[0::2, 0], full[:, t], atol=1e-4)
    alignment = numpy(cache["per_hypothesis"]["alignment"])
    assert alignment.shape == (2 * len(source), 1, 5, source.shape[1])
    written = target[:, :5] != 0  # the full pass masks padded target positions
    for copy in (0, 1):
        assert_close(alignment[copy::2, 0][written], expected[:, :5][written], atol=1e-5)


def test_decode_step_refuses_an_alignment_without_its_cache():
    model = tiny()
    source, _ = batch()
    plain = model.init_cache(model.encode(source), source != 0, max_length=8)
    aligned = model.init_cache(model.encode(source), source != 0, max_length=8, aligned=True)
    with pytest.raises(ValueError, match="alignment_layer=0 and a cache without"):
        model.decode_step(source[:, :1], plain, 0, alignment_layer=0)
    with pytest.raises(ValueError, match="attention_layer=5"):
        model.decode_step(source[:, :1], aligned, 0, alignment_layer=5)


def test_decode_step_refuses_a_cache_without_its_parts():
    model = tiny()
    source, _ = batch()
    cache = model.init_cache(model.encode(source), source != 0, max_length=8)
    with pytest.raises(ValueError, match="missing \\['per_sentence'\\]"):
        model.decode_step(source[:, :1], {"per_hypothesis": cache["per_hypothesis"]}, 0)


@pytest.mark.tensorflow_only
def test_decode_step_traces_once_in_a_while_loop():
    import tensorflow as tf

    model = tiny()
    source, target = batch()
    traces = []

    @tf.function
    def run(source, target):
        traces.append(1)
        cache = model.init_cache(model.encode(source), source != 0, max_length=8)

        def body(t, cache, out):
            logits, cache = model.decode_step(target[:, t : t + 1], cache, t)
            return t + 1, cache, out.write(t, logits[:, 0])

        _, _, out = tf.while_loop(
            lambda t, *_: t < tf.shape(target)[1],
            body,
            (0, cache, tf.TensorArray(tf.float32, size=tf.shape(target)[1])),
        )
        return tf.transpose(out.stack(), (1, 0, 2))

    assert_close(run(source, target), model((source, target)), atol=1e-4)
    run(source, target)
    assert len(traces) == 1


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="a JAX-compiled loop")
def test_decode_step_runs_in_a_jax_compiled_loop():
    """The cache's shapes never change, so `lax.fori_loop` under `jax.jit`
    (which accepts only a fixed-shape carry) runs `decode_step`."""
    import jax

    model = tiny()
    source, target = batch()

    @jax.jit
    def run(source, target):
        cache = model.init_cache(model.encode(source), source != 0, max_length=8)
        out = jax.numpy.zeros(target.shape + (VOCAB,))

        def body(t, carry):
            cache, out = carry
            step = jax.lax.dynamic_slice_in_dim(target, t, 1, axis=1)
            logits, cache = model.decode_step(step, cache, t)
            return cache, jax.lax.dynamic_update_slice_in_dim(out, logits, t, axis=1)

        return jax.lax.fori_loop(0, target.shape[1], body, (cache, out))[1]

    assert_close(run(source, target), model((source, target)), atol=1e-4)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_trains_and_returns_float32(policy):
    keras.mixed_precision.set_global_policy(policy)
    model = micro_model(vocab_size=VOCAB)
    source, target = batch()
    assert dtype(model((source, target))) == "float32"
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    before = [ops.convert_to_numpy(w) for w in model.trainable_weights]
    history = model.fit((source, target), target, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    changed = [
        not np.allclose(ops.convert_to_numpy(w), b)
        for w, b in zip(model.trainable_weights, before, strict=True)
    ]
    assert sum(changed) > len(changed) // 2
    for weight in model.weights:
        assert dtype(weight) == "float32"


@pytest.mark.large  # trains to a result
def test_learns_to_copy():
    """200 updates on a copy task, the learning rate annealed to zero, and
    the model copies: on six seeds its accuracy was 0.9989 or more (the
    last epoch's at a constant rate wandered between 0.90 and 0.99)."""
    model = tiny(dropout=0.0)
    # Its own generator: the same data whatever ran before.
    data = np.random.default_rng(0).integers(3, 12, size=(256, 6))
    target_in = np.concatenate([np.ones((256, 1), int), data], 1)
    target_out = np.concatenate([data, np.full((256, 1), 2)], 1)
    epochs, batches = 25, 256 // 32
    model.compile(
        optimizer=keras.optimizers.Adam(
            keras.optimizers.schedules.CosineDecay(3e-3, epochs * batches)
        ),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit((data, target_in), target_out, batch_size=32, epochs=epochs, verbose=0)
    scores = model.evaluate((data, target_in), target_out, verbose=0, return_dict=True)
    assert scores["accuracy"] > 0.97, scores


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(vocab_size=100, d_model=100, num_heads=8), "d_model"),
        (dict(vocab_size=100, dropout=1.0), "dropout"),
        (dict(vocab_size=100, dropout=-0.1), "dropout"),
        (dict(vocab_size=100, attention_dropout=1.2), "attention_dropout"),
        (dict(vocab_size=0), "vocab_size"),
        (dict(vocab_size=100, num_layers=0), "num_layers"),
        (dict(vocab_size=100, d_model=-512), "d_model"),
        (dict(vocab_size=100, d_ff=0), "d_ff"),
        (dict(vocab_size=100, num_heads=0), "num_heads"),
        (dict(vocab_size=100, tie_embeddings="both"), "tie_embeddings"),
        (dict(vocab_size=100, position_encoding="rope"), "position_encoding"),
        (dict(vocab_size=100, pad_id=100), "pad_id"),
        (dict(source_vocab_size=10, target_vocab_size=20), "target_vocab_size"),
        (dict(), "vocab_size"),
    ],
)
def test_bad_configuration_raises(kwargs, name):
    with pytest.raises(ValueError, match=f"{name}="):
        Transformer(**kwargs)


def test_unknown_preset_and_override():
    with pytest.raises(ValueError, match="Received: preset='huge'"):
        Transformer.from_preset("huge", vocab_size=10)
    with pytest.raises(ValueError, match="d_modle"):
        Transformer.from_preset("tiny", vocab_size=10, d_modle=3)


def test_from_preset_applies_overrides():
    model = Transformer.from_preset("big", vocab_size=100, num_layers=2, dropout=0.2)
    assert (model.d_model, model.num_heads, model.d_ff) == (1024, 16, 4096)
    assert (model.num_layers, model.dropout) == (2, 0.2)
    base = Transformer.from_preset("base", vocab_size=100)
    assert (base.num_layers, base.d_model, base.num_heads, base.d_ff, base.dropout) == (
        6,
        512,
        8,
        2048,
        0.1,
    )


def test_out_of_vocabulary_ids_raise():
    model = tiny()
    source, target = batch()
    source[0, 0] = VOCAB
    with pytest.raises(ValueError, match=f"vocab_size={VOCAB}"):
        model((source, target))


def test_attention_scores_are_distributions_that_respect_masks():
    model = tiny()
    source, target = batch()
    scores = model.attention_scores(source, target)
    assert [len(scores[k]) for k in ("encoder", "decoder", "cross")] == [2, 2, 2]
    encoder = ops.convert_to_numpy(scores["encoder"][0])
    decoder = ops.convert_to_numpy(scores["decoder"][1])
    cross = ops.convert_to_numpy(scores["cross"][0])
    assert encoder.shape == (3, 4, 7, 7) and cross.shape == (3, 4, 5, 7)
    np.testing.assert_allclose(cross.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(cross[1, :, :, 4:], 0.0)  # pad source tokens
    np.testing.assert_array_equal(decoder[:, :, 0, 1:], 0.0)  # causal


def test_logits_and_attention_are_the_forward_pass_and_its_attentions():
    model = tiny()
    source, target = batch()
    logits, scores = model.logits_and_attention(source, target)
    np.testing.assert_allclose(
        ops.convert_to_numpy(logits),
        ops.convert_to_numpy(model((source, target), training=False)),
        rtol=1e-5, atol=1e-5,
    )  # fmt: skip
    cross = ops.convert_to_numpy(scores[1]["cross_attention"])
    assert len(scores) == 2 and cross.shape == (3, 4, 5, 7)
    np.testing.assert_allclose(cross.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(cross[1, :, :, 4:], 0.0)  # pad source tokens


def test_config_lists_every_constructor_argument():
    config = tiny(seed=3).get_config()
    arguments = set(inspect.signature(Transformer.__init__).parameters) - {"self", "kwargs"}
    assert set(config) == arguments | {"name", "trainable", "dtype"}
    assert config["seed"] == 3 and config["vocab_size"] == VOCAB


def test_seed_reproduces_dropout_and_each_dropout_draws_its_own_mask():
    source, target = batch()

    def training_logits(seed):
        model = tiny(dropout=0.5, attention_dropout=0.5, seed=seed)
        model.set_weights(reference_weights)
        return ops.convert_to_numpy(model((source, target), training=True))

    reference_weights = tiny().get_weights()
    np.testing.assert_array_equal(training_logits(11), training_logits(11))
    assert not np.allclose(training_logits(11), training_logits(12))
    # Two dropouts of the same shape in one model never share a mask.
    seeds = [dropout.seed for dropout in dropouts(tiny(seed=11))]
    # Per encoder layer: 2 residual, 1 attention, 1 feed-forward dropout;
    # per decoder layer: 3 residual, 2 attention, 1 feed-forward; then the
    # embeddings' dropout.
    per_encoder_layer, per_decoder_layer = 2 + 1 + 1, 3 + 2 + 1
    assert len(seeds) == len(set(seeds)) == 2 * per_encoder_layer + 2 * per_decoder_layer + 1


def dropouts(layer, seen=None):
    """Every `Dropout` reachable through the attributes of `layer`."""
    seen = set() if seen is None else seen
    if id(layer) in seen:
        return []
    seen.add(id(layer))
    if isinstance(layer, keras.layers.Dropout):
        return [layer]
    found = []
    for value in vars(layer).values():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, keras.layers.Layer):
                found += dropouts(item, seen)
    return found


def test_encode_and_decode_default_to_inference():
    model = tiny(dropout=0.5)
    source, target = batch()
    encoded = model.encode(source)
    assert_close(encoded, model.encode(source, training=False), atol=0)
    mask = source != 0
    assert_close(
        model.decode(target, encoded, mask),
        model.decode(target, encoded, mask, training=False),
        atol=0,
    )
    training = ops.convert_to_numpy(model.encode(source, training=True))
    assert not np.allclose(training, numpy(encoded))


def test_set_dropout_of_a_made_model():
    # The rate a time budget chooses once training runs
    # (`training.DropoutByPasses`): every dropout of the model follows.
    model = micro_model(dropout=0.4, seed=5)
    rng = np.random.default_rng(1)
    source = ops.convert_to_tensor(rng.integers(4, 20, (2, 6)), "int32")
    target = ops.convert_to_tensor(rng.integers(4, 20, (2, 5)), "int32")
    inference = numpy(model((source, target), training=False))
    assert not np.allclose(numpy(model((source, target), training=True)), inference)
    model.set_dropout(0.0)
    assert_close(model((source, target), training=True), inference)
    model.set_dropout(0.25)
    assert not np.allclose(numpy(model((source, target), training=True)), inference)
    config = model.get_config()
    assert config["dropout"] == 0.25
    restored = Transformer.from_config(config)
    assert restored.dropout == restored.encoder.stack[0].dropout == 0.25
    with pytest.raises(ValueError, match="dropout=0"):
        micro_model().set_dropout(0.1)

import numpy as np
import pytest
from keras import ops

from keras_transformer.training import FineTuningSetup
from keras_transformer.training import merge_lora
from keras_transformer.training import prepare_fine_tuning
from keras_transformer.training.fine_tuning import lora_targets
from tests.micro import micro_model
from tests.training.helpers import train_quietly

pytestmark = pytest.mark.tensorflow_only  # `train` is TensorFlow's


def snapshot(model):
    return {v.path: ops.convert_to_numpy(v) for v in model.weights}


def changed(before, model):
    now = snapshot(model)
    return {path for path, value in now.items() if not np.array_equal(before[path], value)}


def test_frozen_parts_stay_as_they_were(tmp_path):
    model = micro_model(output_bias=True, tie_embeddings="none")
    setup = prepare_fine_tuning(model, freeze="embeddings, encoder")
    assert setup.frozen == ("embeddings", "encoder") and setup.lora_rank is None
    before = snapshot(model)
    train_quietly(tmp_path, 3, model)
    moved = changed(before, model)
    assert moved and all("/decoder/" in path for path in moved)
    decoder = {v.path for v in model.decoder.weights}
    assert moved == decoder  # every decoder weight trained, nothing else
    assert setup.trainable_weights == sum(int(np.prod(v.shape)) for v in model.decoder.weights)


def test_lora_trains_only_its_factors_and_merges_to_the_same_outputs(tmp_path):
    model = micro_model()
    plain_count = model.count_params()
    setup = prepare_fine_tuning(model, lora_rank=2)
    targets = lora_targets(model)
    # 4 projections per attention (self + cross in the decoder), 2 feed-forward layers.
    assert setup.lora_layers == len(targets) == (4 + 2) + (8 + 2)
    # Keras's LoRA factors a kernel `(*rows, columns)` as A `(*rows, 2)` B `(2, columns)`:
    # an attention projection's `(d_model, heads, depth)` per head.
    expected = sum(2 * (int(np.prod(d.kernel.shape[:-1])) + d.kernel.shape[-1]) for d in targets)
    assert setup.trainable_weights == expected
    assert setup.total_weights == plain_count + expected
    before = snapshot(model)
    train_quietly(tmp_path, 3, model)
    moved = changed(before, model)
    assert moved and all("lora_kernel" in path for path in moved)
    source = np.array([[5, 6, 7, 3, 0]])
    target = np.array([[2, 8, 9, 4]])
    merged = merge_lora(model)
    assert merged.count_params() == plain_count
    assert not any("lora" in v.path for v in merged.weights)
    np.testing.assert_allclose(merged((source, target)), model((source, target)), atol=1e-5)
    # LoRA changed the model: the merged kernels are not the originals.
    original = model.encoder.stack[0].self_attention.query_dense._kernel
    merged_kernel = ops.convert_to_numpy(merged.encoder.stack[0].self_attention.query_dense.kernel)
    assert not np.array_equal(merged_kernel, before[original.path])


def test_lora_alpha_scales_the_update():
    model = micro_model()
    prepare_fine_tuning(model, lora_rank=2, lora_alpha=6)
    dense = lora_targets(model)[0]
    rng = np.random.default_rng(0)
    dense.lora_kernel_b.assign(rng.normal(size=dense.lora_kernel_b.shape).astype("float32"))
    kernel = ops.convert_to_numpy(dense._kernel)
    expected = kernel + 3.0 * ops.convert_to_numpy(dense.lora_kernel_a) @ ops.convert_to_numpy(
        dense.lora_kernel_b
    )
    np.testing.assert_allclose(ops.convert_to_numpy(dense.kernel), expected, atol=1e-5)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(freeze="encoder,vocabulary"), "freeze='vocabulary'"),
        (dict(lora_rank=0), "lora_rank=0"),
        (dict(lora_alpha=4), "needs a `lora_rank`"),
        (dict(lora_rank=2, lora_alpha=-1), "lora_alpha=-1"),
    ],
)
def test_bad_arguments_are_named(options, message):
    with pytest.raises(ValueError, match=message):
        prepare_fine_tuning(micro_model(), **options)


def test_lora_twice_is_refused():
    model = micro_model()
    prepare_fine_tuning(model, lora_rank=2)
    with pytest.raises(ValueError, match="already enabled"):
        prepare_fine_tuning(model, lora_rank=2)


def test_report():
    setup = FineTuningSetup(("encoder",), None, 0, 250, 1000)
    assert str(setup) == "250 of 1,000 weights train (25.0%; frozen: encoder)"

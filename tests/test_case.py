"""The checks every public layer goes through (`run_layer_test`)."""

import inspect
import json
import os
import tempfile

import keras
import numpy as np
from keras import ops

PACKAGE = "keras_transformer"
MIXED_POLICIES = ("mixed_bfloat16", "mixed_float16")


def numpy(x):
    """A tensor or variable as a NumPy array."""
    return ops.convert_to_numpy(ops.convert_to_tensor(x))


def dtype(x):
    """A tensor's or variable's dtype as Keras names it (`"float32"`) on
    every backend."""
    return keras.backend.standardize_dtype(x.dtype)


def assert_close(actual, expected, atol=1e-5, rtol=1e-5):
    if ops.is_tensor(expected) or isinstance(expected, keras.Variable):
        expected = numpy(expected)
    np.testing.assert_allclose(numpy(actual), np.asarray(expected), atol=atol, rtol=rtol)


def _as_kwargs(layer_cls, input_data):
    """Call inputs as a dict of keyword arguments."""
    if isinstance(input_data, dict):
        return dict(input_data)
    first = list(inspect.signature(layer_cls.call).parameters)[1]  # after self
    return {first: input_data}


def _float_tensors(structure):
    return [
        t
        for t in keras.tree.flatten(structure)
        if keras.backend.is_float_dtype(keras.backend.standardize_dtype(t.dtype))
    ]


def _shapes(structure):
    return [tuple(t.shape) for t in keras.tree.flatten(structure)]


def _expected_shapes(expected):
    if all(d is None or isinstance(d, int) for d in expected):
        return [tuple(expected)]
    return [tuple(s) for s in expected]


def run_serialization_test(layer):
    """`get_config`/`from_config` and a JSON round trip keep the config, and
    the class is registered under the package's name."""
    cls = layer.__class__
    config = layer.get_config()
    assert cls.from_config(config).get_config() == config

    serialized = keras.saving.serialize_keras_object(layer)
    assert serialized["registered_name"] == f"{PACKAGE}>{cls.__name__}"
    revived = keras.saving.deserialize_keras_object(json.loads(json.dumps(serialized)))
    assert isinstance(revived, cls)
    assert revived.get_config() == config


def run_build_test(layer_cls, init_kwargs, kwargs, call_kwargs, expected_num_trainable_weights):
    """Building from the shapes of the call arguments (`build(<arg>_shape=)`)
    creates every weight; calling afterwards creates none."""
    layer = layer_cls(**init_kwargs)
    if not layer.built:
        accepted = inspect.signature(layer.build).parameters
        shapes = {f"{name}_shape": tuple(value.shape) for name, value in kwargs.items()}
        layer.build(**{name: shape for name, shape in shapes.items() if name in accepted})
    assert layer.built
    assert len(layer.trainable_weights) == expected_num_trainable_weights
    weights = len(layer.weights)
    layer(**kwargs, **call_kwargs)
    assert len(layer.weights) == weights


def functional_model(layer, kwargs, call_kwargs):
    """A functional model around `layer`, with one `keras.Input` per
    tensor in `kwargs` (their shapes without the batch axis)."""
    inputs = {
        name: keras.Input(
            shape=tuple(value.shape)[1:],
            dtype=keras.backend.standardize_dtype(value.dtype),
            name=name,
        )
        for name, value in kwargs.items()
    }
    outputs = layer(**inputs, **call_kwargs)
    return keras.Model(inputs, outputs)


def run_model_saving_test(layer, kwargs, call_kwargs):
    """A model holding the layer saves to `.keras` and loads, without
    `custom_objects`, into one with identical outputs."""
    model = functional_model(layer, kwargs, call_kwargs)
    expected = model(kwargs)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        restored = keras.saving.load_model(path)
    actual = keras.tree.flatten(restored(kwargs))
    for a, b in zip(actual, keras.tree.flatten(expected), strict=True):
        assert_close(a, b, atol=0, rtol=0)


def run_training_step(layer, kwargs, call_kwargs):
    """One `fit` step changes every trainable weight (gradients flow).

    Attention key biases are exempt: `q·(k + b_k)` adds the same `q·b_k` to
    every logit of a softmax row, so their gradient is exactly zero.
    """
    model = functional_model(layer, kwargs, call_kwargs)
    before = [numpy(w) for w in model.trainable_weights]
    outputs = model(kwargs)
    targets = keras.tree.map_structure(lambda t: np.ones(t.shape, "float32"), outputs)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    model.fit(kwargs, targets, batch_size=len(next(iter(kwargs.values()))), epochs=1, verbose=0)
    for weight, old in zip(model.trainable_weights, before, strict=True):
        if weight.path.endswith("key/bias"):
            continue
        assert not np.allclose(numpy(weight), old), f"{weight.path} did not train"


def run_mixed_precision_test(layer_cls, init_kwargs, kwargs, call_kwargs):
    """Under each mixed policy, weights stay float32 and every float output
    is in the compute dtype and finite."""
    for policy in MIXED_POLICIES:
        layer = layer_cls(**init_kwargs, dtype=policy)
        outputs = layer(**kwargs, **call_kwargs)
        for weight in layer.weights:
            assert keras.backend.standardize_dtype(weight.dtype) == "float32"
        floats = _float_tensors(outputs)
        assert floats, "no float output to check"
        for tensor in floats:
            assert keras.backend.standardize_dtype(tensor.dtype) == layer.compute_dtype, policy
            assert np.all(np.isfinite(numpy(ops.cast(tensor, "float32"))))


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_data,
    expected_output_shape,
    expected_num_trainable_weights,
    call_kwargs=None,
    run_training_check=True,
):
    """Runs the checks every public layer must pass.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments.
        input_data: a tensor for the first call argument, or a dict of call
            arguments that are tensors.
        expected_output_shape: shape (or nested shapes) of the eager output.
        expected_num_trainable_weights: number of trainable weights.
        call_kwargs: non-tensor call arguments (e.g. `use_causal_mask`).
        run_training_check: whether to fit one step.

    Returns:
        The eager output of the layer, for further checks.
    """
    call_kwargs = call_kwargs or {}
    kwargs = {k: ops.convert_to_tensor(v) for k, v in _as_kwargs(layer_cls, input_data).items()}

    layer = layer_cls(**init_kwargs)
    run_serialization_test(layer)

    # Eager call.
    outputs = layer(**kwargs, **call_kwargs)
    assert _shapes(outputs) == _expected_shapes(expected_output_shape)
    assert len(layer.trainable_weights) == expected_num_trainable_weights
    run_serialization_test(layer)  # the built layer serializes too

    # Symbolic call: the same shapes with an unknown batch size.
    symbolic = layer_cls(**init_kwargs)
    symbolic_inputs = {
        name: keras.KerasTensor((None,) + tuple(v.shape)[1:], dtype=v.dtype)
        for name, v in kwargs.items()
    }
    symbolic_outputs = symbolic(**symbolic_inputs, **call_kwargs)
    assert [s[1:] for s in _shapes(symbolic_outputs)] == [s[1:] for s in _shapes(outputs)]

    run_build_test(layer_cls, init_kwargs, kwargs, call_kwargs, expected_num_trainable_weights)
    run_model_saving_test(layer_cls(**init_kwargs), kwargs, call_kwargs)
    if run_training_check and layer.trainable_weights:
        run_training_step(layer_cls(**init_kwargs), kwargs, call_kwargs)
    run_mixed_precision_test(layer_cls, init_kwargs, kwargs, call_kwargs)
    return outputs

"""What `model.quantize(...)` made of a `Transformer`'s layers, as its
config records it and its constructor rebuilds it.

Keras's `quantize` changes the layers, not the model's arguments: the
config records each quantized layer's dtype policy in a
`DTypePolicyMap` (`dtype`), by layer path, as keras-hub's models do. A
`Transformer` built from such a map builds its layers in the map's
default policy and quantizes the mapped ones, so that each layer holds
its own policy: Keras's layers decide what to save from
`layer.dtype_policy`, which is the whole map for a layer built with one,
and would save a loaded int8 model wrongly.
"""

import keras


def quantized_policies(model):
    """The serialized `DTypePolicyMap` of `model`'s quantized layers over
    its default policy, or `None` when none is quantized."""
    quantized = {
        layer.path: layer.dtype_policy
        for layer in model._flatten_layers(include_self=False)
        if layer.quantization_mode is not None
    }
    if not quantized:
        return None
    policies = keras.dtype_policies.DTypePolicyMap(default_policy(model.dtype_policy), quantized)
    return keras.dtype_policies.serialize(policies)


def default_policy(policy):
    """The policy the layers are built in: a map's default, or `policy`."""
    if isinstance(policy, keras.dtype_policies.DTypePolicyMap):
        return policy.default_policy
    return policy


def quantize_as(model, policy):
    """Quantizes each layer of the built `model` that `policy` (a
    `DTypePolicyMap`) maps to a quantized policy, in its mode.

    Raises:
        ValueError: the map names a layer the model does not have, or a
            policy that is not a quantization.
    """
    if not isinstance(policy, keras.dtype_policies.DTypePolicyMap):
        return
    layers = {layer.path: layer for layer in model._flatten_layers(include_self=False)}
    for path in policy.keys():
        mode = policy[path].quantization_mode
        if path not in layers or mode is None:
            raise ValueError(
                "A `Transformer`'s `dtype` map names the quantized layers of a model (what "
                "`model.quantize` made of it, as its config records it). Received: "
                f"{path!r} -> {policy[path].name}"
            )
        layers[path].quantize(mode)

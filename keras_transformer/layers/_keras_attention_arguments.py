"""The arguments of `keras.layers.MultiHeadAttention` that our
`MultiHeadAttention` takes for compatibility: what they mean here, and the
values it refuses."""


def output_features(output_shape):
    """`output_shape` (`None`, an int or a tuple of one int, as Keras's
    layer takes it) as the number of output features, or `None`."""
    if output_shape is None:
        return None
    features = output_shape
    if isinstance(output_shape, (list, tuple)):
        features = output_shape[0] if len(output_shape) == 1 else None
    if isinstance(features, bool) or not isinstance(features, int) or features <= 0:
        raise ValueError(
            "`output_shape` must be a positive int, or a tuple of one, the output's "
            f"feature size (attention over sequences). Received: output_shape={output_shape!r}"
        )
    return features


# What `keras.layers.MultiHeadAttention` accepts beyond the paper's attention,
# with the values that mean "off".
_NOT_SUPPORTED = {
    "sliding_window": (None,),
    "flash_attention": (None, False),
    "use_gate": (False,),
}


def check_paper_attention(attention_axes, sliding_window, flash_attention, use_gate):
    """Raises a `ValueError` naming the first argument of Keras's layer that
    asks for more than attention over the sequence axis."""
    axes = (attention_axes,) if isinstance(attention_axes, int) else attention_axes
    if axes is not None and tuple(axes) not in ((1,), (-2,)):
        raise ValueError(
            "`attention_axes` must be None (or 1, the sequence axis): this layer attends over "
            "sequences `(batch, length, features)`. "
            f"Received: attention_axes={attention_axes!r}"
        )
    given = dict(sliding_window=sliding_window, flash_attention=flash_attention, use_gate=use_gate)
    for name, value in given.items():
        if not any(value is off for off in _NOT_SUPPORTED[name]):
            off = " or ".join(repr(v) for v in _NOT_SUPPORTED[name])
            raise ValueError(
                f"`{name}` is not supported (keras_transformer's attention is the paper's); "
                f"it must be {off}. Received: {name}={value!r}"
            )

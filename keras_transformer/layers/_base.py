"""What encoder/decoder layers and stacks share: arguments and sub-layers."""

import inspect

import keras
from keras import ops

from keras_transformer.layers._utils import clone_initializer
from keras_transformer.layers._utils import sublayer_seed
from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer_runtime import validation

# The arguments every encoder/decoder layer and stack takes, documented once
# and written into each class's docstring by `document_layer_arguments`.
LAYER_ARGUMENTS_DOC = """num_heads: attention heads `h` (8 base, 16 big).
        d_ff: inner size of the feed-forward network (2048 base, 4096 big).
        key_dim: size of each query/key head `d_k`; defaults to
            `d_model // num_heads`, which requires divisibility.
        value_dim: size of each value head `d_v`; defaults to `key_dim`.
        dropout: `P_drop`, applied to every sub-layer output before the
            residual addition (0.1 base, 0.3 big).
        attention_dropout: dropout on the attention probabilities.
        relu_dropout: dropout on the feed-forward inner activations.
        activation: feed-forward activation, ReLU in the paper.
        norm_first: `False` (the paper) computes
            `LayerNorm(x + Dropout(Sublayer(x)))`; `True` (pre-norm)
            computes `x + Dropout(Sublayer(LayerNorm(x)))`.
        layer_norm_epsilon: epsilon of every `LayerNormalization`.
        kernel_initializer: initializer of every dense kernel.
        bias_initializer: initializer of every dense bias.
        seed: seed of the dropouts; each sub-layer gets its own seed derived
            from it, so one seed reproduces a run. `None`: Keras's global
            random state.
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`...)."""


def document_layer_arguments(cls):
    """Class decorator: writes `LAYER_ARGUMENTS_DOC` where the docstring
    says `{layer_arguments}`, so `help()` lists every argument."""
    cls.__doc__ = cls.__doc__.replace("{layer_arguments}", LAYER_ARGUMENTS_DOC)
    return cls


@document_layer_arguments
class TransformerLayerBase(keras.layers.Layer):
    """Arguments and sub-layers shared by `EncoderLayer`, `DecoderLayer`,
    `Encoder` and `Decoder`, and the residual connection around every
    sub-layer.

    Args:
        {layer_arguments}
    """

    def __init__(
        self,
        num_heads,
        d_ff,
        key_dim=None,
        value_dim=None,
        dropout=0.1,
        attention_dropout=0.0,
        relu_dropout=0.0,
        activation="relu",
        norm_first=False,
        layer_norm_epsilon=1e-6,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed=None,
        **kwargs,
    ):
        validation.check_positive_int(num_heads=num_heads, d_ff=d_ff)
        validation.check_rate(
            dropout=dropout, attention_dropout=attention_dropout, relu_dropout=relu_dropout
        )
        validation.check_positive_int(allow_none=True, key_dim=key_dim, value_dim=value_dim)
        super().__init__(**kwargs)
        self.supports_masking = True
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.dropout = dropout
        self._built_with_dropout = dropout > 0  # Keras's Dropout then has a seed
        self.attention_dropout = attention_dropout
        self.relu_dropout = relu_dropout
        self.activation = keras.activations.get(activation)
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed

    def layer_arguments(self):
        """The arguments above as plain values (what `get_config` adds)."""
        return {
            "num_heads": self.num_heads,
            "d_ff": self.d_ff,
            "key_dim": self.key_dim,
            "value_dim": self.value_dim,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "relu_dropout": self.relu_dropout,
            "activation": keras.activations.serialize(self.activation),
            "norm_first": self.norm_first,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "seed": self.seed,
        }

    def get_config(self):
        config = super().get_config()
        config.update(self.layer_arguments())
        return config

    def set_dropout(self, rate):
        """Sets P_drop, the rate of the dropout on every residual branch,
        after the layer was made (`Transformer.set_dropout`). Keras traces
        a rate as a number: a train function made before must be made
        again (`model.make_train_function(force=True)`).

        Raises:
            ValueError: `rate` not in [0, 1), or positive for a layer made
                with `dropout=0`, whose dropouts have no random seed.

        Example:

        >>> layer = EncoderLayer(num_heads=8, d_ff=2048, dropout=0.2)
        >>> layer.set_dropout(0.1)
        >>> layer.get_config()["dropout"]
        0.1
        """
        validation.check_rate(rate=rate)
        if rate > 0 and not self._built_with_dropout:
            raise ValueError(
                f"`{self.name}` was made with dropout=0: its dropout has no random seed. Make "
                f"it with a positive dropout to set one later. Received: rate={rate!r}"
            )
        self.dropout = rate
        if self.built:
            for layer in self._residual_dropouts():
                layer.rate = rate

    def _residual_dropouts(self):
        """The `keras.layers.Dropout` of each residual branch."""
        return [self.self_attention_dropout, self.feed_forward_dropout]

    def _build_for(self, *inputs):
        """Builds the layer for `inputs` if a method other than `call` is
        its first use."""
        if not self.built:
            self.build(*(tuple(x.shape) for x in inputs))

    # Sub-layer factories, used by the subclasses' `build`.

    def _head_dims(self, d_model):
        key_dim = self.key_dim
        if key_dim is None:
            validation.check_divisible("d_model", d_model, "num_heads", self.num_heads)
            key_dim = d_model // self.num_heads
        return key_dim, self.value_dim or key_dim

    def _make_attention(self, name, query_shape, value_shape):
        key_dim, value_dim = self._head_dims(query_shape[-1])
        layer = MultiHeadAttention(
            num_heads=self.num_heads,
            key_dim=key_dim,
            value_dim=value_dim,
            dropout=self.attention_dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            seed=sublayer_seed(self.seed, name),
            dtype=self.dtype_policy,
            name=name,
        )
        layer.build(query_shape, value_shape)
        return layer

    def _make_feed_forward(self, inputs_shape):
        layer = FeedForward(
            self.d_ff,
            activation=self.activation,
            dropout=self.relu_dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            seed=sublayer_seed(self.seed, "feed_forward"),
            dtype=self.dtype_policy,
            name="feed_forward",
        )
        layer.build(inputs_shape)
        return layer

    def _make_norm(self, name, inputs_shape):
        layer = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )
        layer.build(inputs_shape)
        return layer

    # The sub-layers both layer kinds have, each with its residual connection.

    def _build_self_attention(self, inputs_shape):
        self.self_attention = self._make_attention("self_attention", inputs_shape, inputs_shape)
        self.self_attention_norm, self.self_attention_dropout = self._make_residual(
            "self_attention", inputs_shape
        )

    def _build_feed_forward(self, inputs_shape):
        self.feed_forward = self._make_feed_forward(inputs_shape)
        self.feed_forward_norm, self.feed_forward_dropout = self._make_residual(
            "feed_forward", inputs_shape
        )

    def _make_residual(self, sublayer_name, inputs_shape):
        """The norm and the dropout of the residual connection around the
        sub-layer `sublayer_name` (`<name>_norm`, `<name>_dropout`)."""
        dropout = keras.layers.Dropout(
            self.dropout,
            seed=sublayer_seed(self.seed, f"{sublayer_name}_dropout"),
            dtype=self.dtype_policy,
            name=f"{sublayer_name}_dropout",
        )
        return self._make_norm(f"{sublayer_name}_norm", inputs_shape), dropout

    # The residual connection around every sub-layer, in one place.

    def _sublayer_input(self, x, norm):
        return norm(x) if self.norm_first else x

    def _sublayer_output(self, x, y, norm, dropout, training):
        y = ops.add(x, dropout(y, training=training))  # `x` may be NumPy (PyTorch: no `+`)
        return y if self.norm_first else norm(y)

    def _feed_forward_block(self, x, training):
        """The last sub-layer of both layer kinds, in its residual connection."""
        y = self.feed_forward(self._sublayer_input(x, self.feed_forward_norm), training=training)
        return self._sublayer_output(
            x, y, self.feed_forward_norm, self.feed_forward_dropout, training
        )


class LayerStackBase(TransformerLayerBase):
    """What `Encoder` and `Decoder` share: `num_layers` identical layers
    built from the layer arguments, and a final norm when pre-norm.

    The constructor takes `num_layers`, then exactly the arguments of
    `TransformerLayerBase`; its signature says so (`_stack_signature`).
    """

    def __init__(self, num_layers, *layer_arguments, **layer_keyword_arguments):
        validation.check_positive_int(num_layers=num_layers)
        super().__init__(*layer_arguments, **layer_keyword_arguments)
        self.num_layers = num_layers

    def get_config(self):
        config = super().get_config()
        config["num_layers"] = self.num_layers
        return config

    def _make_stack(self, layer_class, *input_shapes):
        """Builds `self.stack` and `self.final_norm` (`None` if post-norm)."""
        self.stack = []
        for i in range(self.num_layers):
            name = f"layer_{i}"
            arguments = {**self.layer_arguments(), "seed": sublayer_seed(self.seed, name)}
            layer = layer_class(**arguments, dtype=self.dtype_policy, name=name)
            layer.build(*input_shapes)
            self.stack.append(layer)
        self.final_norm = (
            self._make_norm("final_norm", input_shapes[0]) if self.norm_first else None
        )

    def set_dropout(self, rate):
        super().set_dropout(rate)
        for layer in self.stack if self.built else ():
            layer.set_dropout(rate)

    def _residual_dropouts(self):
        return []  # its layers' (`set_dropout`)

    def _final(self, x):
        """The stack's output: `x`, normalized once more when pre-norm."""
        return x if self.final_norm is None else self.final_norm(x)


def _stack_signature():
    """`(self, num_layers, <TransformerLayerBase's arguments>)`, so that
    `help(Encoder)` and `inspect.signature(Encoder)` list every argument."""
    layer = inspect.signature(TransformerLayerBase.__init__)
    self_parameter, *arguments = layer.parameters.values()
    num_layers = inspect.Parameter("num_layers", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return layer.replace(parameters=[self_parameter, num_layers, *arguments])


LayerStackBase.__init__.__signature__ = _stack_signature()

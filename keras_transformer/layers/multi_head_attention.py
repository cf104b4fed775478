"""Multi-head scaled dot-product attention (Vaswani et al., 2017, §3.2)."""

import math

import keras
from keras import ops

from keras_transformer import _backend
from keras_transformer.layers import _keras_attention_arguments
from keras_transformer.layers._attention_decoding import AttentionDecoding
from keras_transformer.layers._graph_kernels import attention_matmul
from keras_transformer.layers._graph_kernels import attention_softmax
from keras_transformer.layers._utils import clone_initializer
from keras_transformer.layers._utils import on_last_axis
from keras_transformer.layers._utils import require_built
from keras_transformer.layers._utils import size
from keras_transformer.layers._utils import sublayer_seed
from keras_transformer.layers.masking import causal_mask
from keras_transformer.layers.masking import merge_masks
from keras_transformer_runtime import validation

# Logit of hidden keys: finite, so a row whose keys are all hidden is no NaN.
_MASKED_LOGIT = -1e9


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(AttentionDecoding, keras.layers.Layer):
    """Multi-head attention: softmax(QKᵀ/√d_k)V over `num_heads` heads.

    Queries, keys and values are projected to `num_heads` heads of size
    `key_dim` (queries, keys) and `value_dim` (values); each head computes
    scaled dot-product attention; the heads are concatenated and projected
    back to the query's feature size (or `output_shape`). The softmax is
    computed in float32 under any dtype policy.

    A drop-in for `keras.layers.MultiHeadAttention` over sequences `(batch,
    length, features)`: the same constructor arguments and call signature.
    What Keras's layer has beyond the paper's attention (other
    `attention_axes`, `sliding_window`, `flash_attention=True`,
    `use_gate=True`) is refused with a `ValueError` naming the argument.

    Masking: a key is attended to only where every given mask allows it.
    Masks are boolean, `True` meaning "may attend": `attention_mask`
    `(batch, query_len, key_len)`, the Keras masks of `query`, `value` and
    `key` (propagated automatically, or passed as `query_mask`/`value_mask`/
    `key_mask`), and a causal mask with `use_causal_mask=True`. A query row
    whose keys are all hidden returns zeros (never NaN).

    On JAX and PyTorch, `call` runs the backend's fused attention kernel
    (`keras.ops.dot_product_attention`: cuDNN's flash attention under JAX
    on NVIDIA GPUs, `scaled_dot_product_attention` under PyTorch) when no
    attention scores are asked for, the value heads have the keys' depth
    and no attention dropout is active: the same output, without the
    probabilities kept for the backward pass.

    Decoding and plots have their own methods: `call_with_cache(query,
    cache, index)`, causal self-attention of new positions over a
    fixed-size cache `{"key", "value"}` (`initial_cache`), returned with
    their keys and values written; `call_with_memory(query, memory,
    memory_mask)`, attention over keys and values projected once
    (`project_memory`, e.g. an encoder output), shared by the rows of a
    sentence; `attention_scores(...)`, the probabilities of `call`.

    Args:
        num_heads: number of attention heads, `h` in the paper.
        key_dim: size of each query/key head, `d_k`.
        value_dim: size of each value head, `d_v`. Defaults to `key_dim`.
        dropout: dropout rate on the attention probabilities.
        use_bias: whether the four projections have biases.
        output_shape: feature size of the output, an int (or a tuple of
            one). Defaults to the query's.
        attention_axes, sliding_window, flash_attention, use_gate: Keras's
            arguments, accepted with the values that leave them off
            (`None`, or 1 for `attention_axes`; `None` or `False`;
            `False`).
        kernel_initializer, bias_initializer, kernel_regularizer,
            bias_regularizer, kernel_constraint, bias_constraint: of the four
            projections' kernels and biases.
        activity_regularizer: regularizer of the output.
        seed: seed of the attention dropout, for reproducible runs.
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`...).

    Call arguments:
        query: `(batch, query_len, query_features)`.
        value: `(batch, key_len, value_features)`.
        key: `(batch, key_len, key_features)`; defaults to `value`.
        query_mask: optional boolean `(batch, query_len)`.
        value_mask: optional boolean `(batch, key_len)`.
        key_mask: optional boolean `(batch, key_len)`.
        attention_mask: optional boolean `(batch, query_len, key_len)`.
        return_attention_scores: also return the attention probabilities
            (before dropout), as Keras's layer does; `attention_scores` is
            the method for them alone.
        training: whether dropout is active.
        use_causal_mask: whether query `i` may only see keys `j <= i`.

    Returns:
        `(batch, query_len, output_features)`; with
        `return_attention_scores`, `(output, scores)`, the scores `(batch,
        num_heads, query_len, key_len)`.

    Example:

    >>> layer = MultiHeadAttention(num_heads=8, key_dim=64)
    >>> x = keras.random.normal((2, 10, 512))
    >>> layer(x, x, use_causal_mask=True).shape
    TensorShape([2, 10, 512])
    >>> cache = layer.initial_cache(batch_size=2, length=10)
    >>> y, cache = layer.call_with_cache(x[:, :1], cache, index=0)
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        output_shape=None,
        attention_axes=None,
        sliding_window=None,
        flash_attention=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        use_gate=False,
        seed=None,
        **kwargs,
    ):
        validation.check_positive_int(num_heads=num_heads, key_dim=key_dim)
        validation.check_rate(dropout=dropout)
        validation.check_positive_int(allow_none=True, value_dim=value_dim)
        _keras_attention_arguments.check_paper_attention(
            attention_axes, sliding_window, flash_attention, use_gate
        )
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        self.supports_masking = True
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim if value_dim is not None else key_dim
        self.dropout = dropout
        self.seed = seed  # of the dropout
        self.use_bias = use_bias
        # Not `self.output_shape`: Keras's functional models read that name.
        self.output_features = _keras_attention_arguments.output_features(output_shape)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.bias_constraint = keras.constraints.get(bias_constraint)

    def _dense(self, units, input_dim, name):
        layer = keras.layers.Dense(
            units,
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            kernel_regularizer=self.kernel_regularizer,
            bias_regularizer=self.bias_regularizer,
            kernel_constraint=self.kernel_constraint,
            bias_constraint=self.bias_constraint,
            dtype=self.dtype_policy,
            name=name,
        )
        layer.build((None, None, input_dim))
        return layer

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        heads = self.num_heads
        self.query_dense = self._dense(heads * self.key_dim, query_shape[-1], "query")
        self.key_dense = self._dense(heads * self.key_dim, key_shape[-1], "key")
        self.value_dense = self._dense(heads * self.value_dim, value_shape[-1], "value")
        self.output_dense = self._dense(
            self.output_features or query_shape[-1], heads * self.value_dim, "output"
        )
        self.dropout_layer = keras.layers.Dropout(
            self.dropout,
            seed=sublayer_seed(self.seed, "attention_dropout"),
            dtype=self.dtype_policy,
            name="attention_dropout",
        )
        self.built = True

    # The paper's attention.

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
    ):
        masks = (query_mask, value_mask, key_mask, attention_mask, use_causal_mask)
        if not return_attention_scores and self._fuses(training):
            return self._fused_attention(query, value, key, *masks)
        scores, values, mask = self._scores(query, value, key, *masks)
        output = self._weighted_values(scores, values, mask, training)
        if return_attention_scores:  # keras.layers.MultiHeadAttention's call signature
            return output, scores
        return output

    def _fuses(self, training):
        """Whether `call` runs the backend's fused kernel: where there is
        one, for heads whose values have the keys' depth (the paper's; as
        JAX's kernel needs), with no dropout of the probabilities asked
        for (the kernels have none)."""
        return (
            _backend.has_fused_attention(self.compute_dtype)
            and self.value_dim == self.key_dim
            and not (training and self.dropout > 0)
        )

    def _fused_attention(self, query, value, key, *masks):
        """`call`'s output through `keras.ops.dot_product_attention` (JAX:
        cuDNN's flash attention on NVIDIA GPUs; PyTorch: its fused
        `scaled_dot_product_attention` kernels): the same attention, with
        no `(batch, heads, q, k)` probabilities kept for the backward pass."""
        key = value if key is None else key
        mask = self._attention_mask(query, size(key, 1), *masks)  # (batch|1, q, k)

        def heads(dense, x, depth):  # (batch, seq, heads, depth): the kernels' layout
            return ops.reshape(on_last_axis(dense, x), (-1, size(x, 1), self.num_heads, depth))

        context = ops.dot_product_attention(
            heads(self.query_dense, query, self.key_dim),
            heads(self.key_dense, key, self.key_dim),
            heads(self.value_dense, value, self.value_dim),
            mask=None if mask is None else ops.expand_dims(mask, 1),  # (batch|1, 1, q, k)
            scale=1.0 / math.sqrt(self.key_dim),
        )
        length = size(query, 1)
        context = ops.reshape(context, (-1, length, self.num_heads * self.value_dim))
        return self._output(context, mask)

    def _scores(self, query, value, key, *masks):
        """`call`'s probabilities `(batch, heads, q, k)`, the per-head values
        they weight, and the merged mask."""
        memory = self.project_memory(value, key)
        mask = self._attention_mask(query, ops.shape(memory["value"])[2], *masks)
        scores = self._probabilities(self._project_query(query), memory, mask)
        return scores, memory["value"], mask

    def _project_query(self, query):
        """`(batch, query_len, features)` to scaled per-head queries `(batch,
        num_heads, query_len, key_dim)`; scaling q is cheaper than the logits."""
        queries = self._split_heads(on_last_axis(self.query_dense, query), self.key_dim)
        return queries * ops.cast(1.0 / math.sqrt(self.key_dim), queries.dtype)

    def project_memory(self, value, key=None):
        """The memory `call_with_memory` attends to (for a decoder: the
        encoder output, projected once): `{"transposed_key": (batch,
        num_heads, key_dim, key_len), "value": (batch, num_heads, key_len,
        value_dim)}`, the keys transposed so that QKᵀ multiplies them as
        they lie."""
        require_built(self, "project_memory")
        memory = self._keys_and_values(value, value if key is None else key)
        return {"transposed_key": ops.swapaxes(memory["key"], -1, -2), "value": memory["value"]}

    def _keys_and_values(self, value, key):
        """Per-head keys and values by position: `{"key": (batch, num_heads,
        key_len, key_dim), "value": (batch, num_heads, key_len, value_dim)}`."""
        return {
            "key": self._split_heads(on_last_axis(self.key_dense, key), self.key_dim),
            "value": self._split_heads(on_last_axis(self.value_dense, value), self.value_dim),
        }

    def _split_heads(self, x, head_dim):
        if x.shape[1] == 1:  # one position (a decoding step): no transpose needed
            return ops.reshape(x, (-1, self.num_heads, 1, head_dim))
        x = ops.reshape(x, (-1, size(x, 1), self.num_heads, head_dim))
        return ops.transpose(x, (0, 2, 1, 3))  # (batch, heads, seq, depth)

    def _attention_mask(
        self, query, key_length, query_mask, value_mask, key_mask, attention_mask, use_causal_mask
    ):
        """Merges every mask into one boolean `(batch|1, q_len, k_len)`."""

        def expanded(mask, axis):  # (batch, q, 1) for queries, (batch, 1, k) for keys
            return None if mask is None else ops.expand_dims(mask, axis)

        causal = None
        if use_causal_mask:
            causal = ops.expand_dims(causal_mask(ops.shape(query)[1], key_length), 0)
        keys = (expanded(value_mask, -2), expanded(key_mask, -2))
        return merge_masks(expanded(query_mask, -1), *keys, attention_mask, causal)

    def _probabilities(self, queries, keys, mask):
        """softmax(QKᵀ) `(batch, heads, q, k)` (queries already scaled) over
        `keys`, a memory (`"transposed_key"`) or a cache (`"key"`, by
        position), zero where `mask` `(batch|1, q, k)` hides every key of a
        query."""
        if "transposed_key" in keys:
            logits = attention_matmul(queries, keys["transposed_key"])
        else:
            logits = attention_matmul(queries, keys["key"], transpose_b=True)
        logits = ops.cast(logits, "float32")  # (b, h, q, k)
        if mask is not None:
            mask = ops.expand_dims(mask, 1)  # (batch, 1, q, k)
            logits = ops.where(mask, logits, _MASKED_LOGIT)
        # Over a single key the softmax is 1, written out: Keras's warns on size-1 axes.
        scores = ops.ones_like(logits) if logits.shape[-1] == 1 else attention_softmax(logits)
        if mask is not None:
            scores = scores * ops.cast(ops.any(mask, axis=-1, keepdims=True), scores.dtype)
        return ops.cast(scores, self.compute_dtype)

    def _weighted_values(self, scores, values, mask, training):
        """The heads' `values` weighted by `scores`, concatenated and
        projected: the output `(batch, q_len, output_features)`."""
        context = attention_matmul(self.dropout_layer(scores, training=training), values)
        length = size(context, 2)
        if context.shape[2] != 1:  # one position needs no transpose
            context = ops.transpose(context, (0, 2, 1, 3))  # (batch, q, heads, dv)
        context = ops.reshape(context, (-1, length, self.num_heads * self.value_dim))
        return self._output(context, mask)

    def _output(self, context, mask):
        """The heads' outputs `(batch, q_len, heads * value_dim)` projected
        to `(batch, q_len, output_features)`: zero where `mask` hides every
        key of a query (a row that sees no key attends to nothing)."""
        output = on_last_axis(self.output_dense, context)
        if mask is None:
            return output
        return output * ops.cast(ops.any(mask, axis=-1, keepdims=True), output.dtype)

    def _attend(self, queries, memory, mask):
        """Attention of scaled per-head `queries` over `memory` (see
        `_probabilities`) and its `"value"`s, dropout off (decoding): the
        output `(batch, q_len, output_features)`."""
        scores = self._probabilities(queries, memory, mask)
        return self._weighted_values(scores, memory["value"], mask, training=False)

    # Decoding and plots.

    def attention_scores(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        use_causal_mask=False,
    ):
        """The attention probabilities of `call` with the same arguments
        (dropout off): `(batch, num_heads, query_len, key_len)`, zero for
        hidden keys and for query rows that see no key."""
        if not self.built:
            self.build(query.shape, value.shape, None if key is None else key.shape)
        masks = (query_mask, value_mask, key_mask, attention_mask, use_causal_mask)
        return self._scores(query, value, key, *masks)[0]

    def get_config(self):
        config = super().get_config()
        output_shape = None if self.output_features is None else (self.output_features,)
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "output_shape": output_shape,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
                "bias_regularizer": keras.regularizers.serialize(self.bias_regularizer),
                "kernel_constraint": keras.constraints.serialize(self.kernel_constraint),
                "bias_constraint": keras.constraints.serialize(self.bias_constraint),
                "seed": self.seed,
            }
        )
        return config

    def compute_output_spec(self, query, value, key=None, return_attention_scores=False, **unused):
        # The masks and `training` change no shape.
        output = keras.KerasTensor(
            query.shape[:-1] + (self.output_features or query.shape[-1],),
            dtype=self.compute_dtype,
        )
        if not return_attention_scores:
            return output
        scores = (query.shape[0], self.num_heads, query.shape[1], value.shape[1])
        return output, keras.KerasTensor(scores, dtype=self.compute_dtype)

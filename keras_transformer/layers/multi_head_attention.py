"""Multi-head scaled dot-product attention (Vaswani et al., 2017, §3.2):
Keras's own layer, with what translation needs on top."""

import keras
from keras import ops

from keras_transformer import _backend
from keras_transformer.layers._attention_decoding import AttentionDecoding
from keras_transformer.layers._graph_kernels import attention_matmul
from keras_transformer.layers._graph_kernels import attention_softmax
from keras_transformer.layers._projection import Projection
from keras_transformer.layers._utils import leading_axes
from keras_transformer.layers._utils import size
from keras_transformer.layers.masking import causal_mask
from keras_transformer.layers.masking import merge_masks
from keras_transformer_runtime import validation

# Logit of hidden keys: finite, so a row whose keys are all hidden is no NaN.
_MASKED_LOGIT = -1e9


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(AttentionDecoding, keras.layers.MultiHeadAttention):
    """`keras.layers.MultiHeadAttention`, with what decoding and training
    a translator add on top.

    It *is* Keras's layer: the same constructor arguments, call, masks,
    weights (`EinsumDense` kernels `(features, heads, depth)`, so
    `set_weights` takes a Keras layer's `get_weights()` and back), config,
    LoRA, quantization, dtype policies and flash attention. On top:

    * `call_with_cache(query, cache, index)`: causal self-attention of new
      positions over a fixed-size key/value cache (`initial_cache`),
      returned with their keys and values written, so that a
      `while_loop` over decoding steps traces once;
    * `call_with_memory(query, memory, memory_mask)`: attention over keys
      and values projected once (`project_memory`, e.g. an encoder
      output), shared by the rows of a sentence (its beams);
    * `attention_scores(...)`: the probabilities of `call`, for plots;
    * over sequences `(batch, length, features)`, `call` computes the
      softmax in float32 under any dtype policy, returns zeros (never NaN)
      for a query row whose keys are all hidden, and runs the fast paths:
      each projection as one matrix product, TensorFlow's stock graph
      kernels, and on JAX and PyTorch the backend's fused kernel
      (`keras.ops.dot_product_attention`: cuDNN's flash attention under
      JAX on NVIDIA GPUs) when no scores are asked for, the value heads
      have the keys' depth and no attention dropout is active.

    Keras's own computation runs, unchanged, for what the paper's
    attention over sequences is not: other `attention_axes` or inputs of
    higher rank, `use_gate`, `sliding_window`, an `output_shape` of more
    than one axis, `flash_attention=True`, an `activity_regularizer`, or a
    subclass's own `_compute_attention`. The decoding methods compute the
    paper's attention only, and refuse those arguments by name.

    Masking: a key is attended to only where every given mask allows it:
    `attention_mask` `(batch, query_len, key_len)` (or broadcastable to
    `(batch, heads, query_len, key_len)`), the Keras masks of `query`,
    `value` and `key` (propagated automatically, or passed as
    `query_mask`/`value_mask`/`key_mask`), and a causal mask with
    `use_causal_mask=True`.

    Args:
        num_heads: number of attention heads, `h` in the paper.
        key_dim: size of each query/key head, `d_k`.
        value_dim: size of each value head, `d_v`. Defaults to `key_dim`.
        dropout: dropout rate on the attention probabilities, in [0, 1).
        **kwargs: every other argument of `keras.layers.MultiHeadAttention`
            (`use_bias`, `output_shape`, `attention_axes`,
            `sliding_window`, `flash_attention`, the initializers,
            regularizers and constraints, `use_gate`, `seed`) and of
            `keras.layers.Layer` (`name`, `dtype`...).

    Call arguments:
        query: `(batch, query_len, query_features)`.
        value: `(batch, key_len, value_features)`.
        key: `(batch, key_len, key_features)`; defaults to `value`.
        query_mask: optional boolean `(batch, query_len)`.
        value_mask: optional boolean `(batch, key_len)`.
        key_mask: optional boolean `(batch, key_len)`.
        attention_mask: optional boolean `(batch, query_len, key_len)`.
        return_attention_scores: also return the attention probabilities
            (before dropout).
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

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, **kwargs):
        validation.check_rate(dropout=dropout)
        super().__init__(num_heads, key_dim, value_dim=value_dim, dropout=dropout, **kwargs)
        self._over_sequences = False  # built for `(batch, length, features)`

    def build(self, query_shape, value_shape, key_shape=None):
        """Keras's `build`; over sequences, with `Projection`s (Keras's
        `EinsumDense` with a flat product and the former layout's loading),
        created as Keras's are, in the same order and with the same names."""
        key_shape = value_shape if key_shape is None else key_shape
        if not all(len(shape) == 3 for shape in (query_shape, value_shape, key_shape)):
            return super().build(query_shape, value_shape, key_shape)
        self.compute_output_shape(query_shape, value_shape, key_shape)  # Keras's shape checks
        bias = "de" if self._use_bias else None
        self._query_dense = self._projection("query", self._key_dim, bias, query_shape)
        self._key_dense = self._projection("key", self._key_dim, bias, key_shape)
        if self._use_gate:
            self._gate_dense = self._projection(
                "gate", self._value_dim, bias, query_shape, activation="sigmoid"
            )
        self._value_dense = self._projection("value", self._value_dim, bias, value_shape)
        self._build_attention(4)  # the projected rank: (batch, length, heads, depth)
        output_shape = tuple(self._output_shape or (query_shape[-1],))
        axes = "efgh"[: len(output_shape)]
        self._output_dense = Projection(
            f"abcd,cd{axes}->ab{axes}",
            output_shape=(None, *output_shape),
            bias_axes=axes if self._use_bias else None,
            name="attention_output",
            **self._get_common_kwargs_for_sublayer(),
        )
        self._output_dense.build((None, None, self._num_heads, self._value_dim))
        self._over_sequences = self._attention_axes == (1,)

    def _projection(self, name, depth, bias_axes, input_shape, activation=None):
        layer = Projection(
            "abc,cde->abde",
            output_shape=(None, self._num_heads, depth),
            bias_axes=bias_axes,
            activation=activation,
            name=name,
            **self._get_common_kwargs_for_sublayer(),
        )
        layer.build(input_shape)
        return layer

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
        if not self._runs_own_attention():
            return super().call(
                query, value, key, *masks[:4], return_attention_scores, training, use_causal_mask
            )
        if not return_attention_scores and self._fuses(training):
            return self._fused_attention(query, value, key, *masks)
        scores, values, mask = self._scores(query, value, key, *masks)
        output = self._weighted_values(scores, values, mask, training)
        if return_attention_scores:
            return output, scores
        return output

    def _runs_own_attention(self):
        """Whether `call` runs this package's attention, or Keras's own
        (see the class docstring)."""
        return (
            self._over_sequences
            and self._beyond_paper_attention() is None
            and self._flash_attention is not True  # Keras's call requires the flash kernel
            and self._activity_regularizer is None  # applied by the sublayers' own calls
            and type(self)._compute_attention is keras.layers.MultiHeadAttention._compute_attention
        )

    def _beyond_paper_attention(self):
        """`(name, value)` of the first argument that asks for another
        attention than the paper's over sequences, or `None`."""
        output_axes = 1 if self._output_shape is None else len(self._output_shape)
        for name, value, beyond in (
            ("attention_axes", self._attention_axes, self.built and not self._over_sequences),
            ("use_gate", self._use_gate, self._use_gate),
            ("sliding_window", self._sliding_window, self._sliding_window is not None),
            ("output_shape", self._output_shape, output_axes != 1),
        ):
            if beyond:
                return name, value
        return None

    def _fuses(self, training):
        """Whether `call` runs the backend's fused kernel: where there is
        one, for heads whose values have the keys' depth (the paper's; as
        JAX's kernel needs), with no dropout of the probabilities asked
        for (the kernels have none)."""
        return (
            _backend.has_fused_attention(self.compute_dtype)
            and self._value_dim == self._key_dim
            and not (training and self._dropout > 0)
        )

    def _fused_attention(self, query, value, key, *masks):
        """`call`'s output through `keras.ops.dot_product_attention` (JAX:
        cuDNN's flash attention on NVIDIA GPUs; PyTorch: its fused
        `scaled_dot_product_attention` kernels): the same attention, with
        no `(batch, heads, q, k)` probabilities kept for the backward pass."""
        key = value if key is None else key
        mask = self._attention_mask(query, value, size(key, 1), *masks)  # (b|1, h|1, q, k)

        def heads(dense, x, depth):  # (batch, seq, heads, depth): the kernels' layout
            return ops.reshape(dense.flat(x), (-1, size(x, 1), self._num_heads, depth))

        context = ops.dot_product_attention(
            heads(self._query_dense, query, self._key_dim),
            heads(self._key_dense, key, self._key_dim),
            heads(self._value_dense, value, self._value_dim),
            mask=mask,
            scale=self._inverse_sqrt_key_dim,
            flash_attention=self._flash_attention,
        )
        length = size(query, 1)
        context = ops.reshape(context, (-1, length, self._num_heads * self._value_dim))
        return self._output(context, mask)

    def _scores(self, query, value, key, *masks):
        """`call`'s probabilities `(batch, heads, q, k)`, the per-head values
        they weight, and the merged mask."""
        memory = self._keys_and_values(value, value if key is None else key)
        mask = self._attention_mask(query, value, ops.shape(memory["value"])[2], *masks)
        scores = self._probabilities(self._project_query(query), memory, mask)
        return scores, memory["value"], mask

    def _project_query(self, query):
        """`(batch, query_len, features)` to scaled per-head queries `(batch,
        num_heads, query_len, key_dim)`; scaling q is cheaper than the logits."""
        queries = self._split_heads(self._query_dense.flat(query), self._key_dim)
        return queries * ops.cast(self._inverse_sqrt_key_dim, queries.dtype)

    def _keys_and_values(self, value, key):
        """Per-head keys and values by position: `{"key": (batch, num_heads,
        key_len, key_dim), "value": (batch, num_heads, key_len, value_dim)}`."""
        return {
            "key": self._split_heads(self._key_dense.flat(key), self._key_dim),
            "value": self._split_heads(self._value_dense.flat(value), self._value_dim),
        }

    def _split_heads(self, x, head_dim):
        if x.shape[1] == 1:  # one position (a decoding step): no transpose needed
            return ops.reshape(x, (-1, self._num_heads, 1, head_dim))
        x = ops.reshape(x, (-1, size(x, 1), self._num_heads, head_dim))
        return ops.transpose(x, (0, 2, 1, 3))  # (batch, heads, seq, depth)

    def _attention_mask(
        self,
        query,
        value,
        key_length,
        query_mask,
        value_mask,
        key_mask,
        attention_mask,
        use_causal_mask,
    ):
        """Merges every mask into one boolean `(batch|1, heads|1, q_len,
        k_len)`, or `None`."""

        def on_axis(mask, axis):  # (batch, 1, q, 1) for queries, (batch, 1, 1, k) for keys
            return None if mask is None else ops.expand_dims(ops.expand_dims(mask, 1), axis)

        causal = None
        if use_causal_mask:
            causal = leading_axes(causal_mask(ops.shape(query)[1], key_length), 2)  # (1, 1, q, k)
        keys = (on_axis(value_mask, -2), on_axis(key_mask, -2))
        return merge_masks(on_axis(query_mask, -1), *keys, _with_heads(attention_mask), causal)

    def _probabilities(self, queries, keys, mask):
        """softmax(QKᵀ) `(batch, heads, q, k)` (queries already scaled) over
        `keys`, a memory (`"transposed_key"`) or a cache (`"key"`, by
        position), zero where `mask` `(batch|1, heads|1, q, k)` hides every
        key of a query."""
        if "transposed_key" in keys:
            logits = attention_matmul(queries, keys["transposed_key"])
        else:
            logits = attention_matmul(queries, keys["key"], transpose_b=True)
        logits = ops.cast(logits, "float32")  # (b, h, q, k)
        if mask is not None:
            logits = ops.where(mask, logits, _MASKED_LOGIT)
        # Over a single key the softmax is 1, written out: Keras's warns on size-1 axes.
        scores = ops.ones_like(logits) if logits.shape[-1] == 1 else attention_softmax(logits)
        if mask is not None:
            scores = scores * ops.cast(ops.any(mask, axis=-1, keepdims=True), scores.dtype)
        return ops.cast(scores, self.compute_dtype)

    def _weighted_values(self, scores, values, mask, training):
        """The heads' `values` weighted by `scores`, concatenated and
        projected: the output `(batch, q_len, output_features)`."""
        context = attention_matmul(self._dropout_layer(scores, training=training), values)
        length = size(context, 2)
        if context.shape[2] != 1:  # one position needs no transpose
            context = ops.transpose(context, (0, 2, 1, 3))  # (batch, q, heads, dv)
        context = ops.reshape(context, (-1, length, self._num_heads * self._value_dim))
        return self._output(context, mask)

    def _output(self, context, mask):
        """The heads' outputs `(batch, q_len, heads * value_dim)` projected
        to `(batch, q_len, output_features)`: zero where `mask` hides every
        key of a query in every head (a row that sees no key attends to
        nothing)."""
        output = self._output_dense.flat(context)
        if mask is None:
            return output
        sees = ops.any(ops.any(mask, axis=-1), axis=1)  # (batch|1, q): some key, some head
        return output * ops.cast(ops.expand_dims(sees, -1), output.dtype)

    def _attend(self, queries, memory, mask):
        """Attention of scaled per-head `queries` over `memory` (see
        `_probabilities`) and its `"value"`s, dropout off (decoding): the
        output `(batch, q_len, output_features)`."""
        scores = self._probabilities(queries, memory, mask)
        return self._weighted_values(scores, memory["value"], mask, training=False)

    # Plots.

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
        _, scores = self(
            query,
            value,
            key,
            query_mask=query_mask,
            value_mask=value_mask,
            key_mask=key_mask,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
            return_attention_scores=True,
        )
        return scores

    def compute_output_spec(self, query, value, key=None, return_attention_scores=False, **kwargs):
        if len(query.shape) != 3 or not return_attention_scores:
            return super().compute_output_spec(
                query, value, key, return_attention_scores=return_attention_scores, **kwargs
            )
        # Keras's gives the scores of self-attention, `(batch, heads, q, q)`.
        output = super().compute_output_spec(query, value, key, **kwargs)
        scores = (query.shape[0], self._num_heads, query.shape[1], value.shape[1])
        return output, keras.KerasTensor(scores, dtype=self.compute_dtype)


def _with_heads(attention_mask):
    """`attention_mask` with the axes Keras's layer broadcasts it over
    added: `(q, k)` and `(batch, q, k)` to `(batch|1, heads|1, q, k)`."""
    if attention_mask is None:
        return None
    while len(attention_mask.shape) < 4:
        attention_mask = ops.expand_dims(attention_mask, -3)
    return attention_mask

"""Multi-head scaled dot-product attention (Vaswani et al., 2017, §3.2)."""

import math

import keras
from keras import ops

from keras_transformer import _validation
from keras_transformer.layers._utils import check_cache_keys
from keras_transformer.layers._utils import clone_initializer
from keras_transformer.layers._utils import require_built
from keras_transformer.layers._utils import sublayer_seed
from keras_transformer.layers.masking import causal_mask
from keras_transformer.layers.masking import merge_masks

# Logit given to hidden keys. Finite (not -inf) so that a row whose keys are
# all hidden gives a uniform softmax instead of NaN; that row is then zeroed.
_MASKED_LOGIT = -1e9


def _write_at(buffer, update, index):
    """`buffer` `(batch, heads, length, depth)` with `update` `(batch, heads,
    steps, depth)` written at positions `index .. index + steps - 1`.

    A select against the positions, not `ops.slice_update`: on TensorFlow
    that lowers to `XlaDynamicUpdateSlice`, which runs only where
    TensorFlow's XLA JIT is linked and enabled (stock TF Serving leaves
    XLA:CPU off), so an exported model would depend on it. One step (the
    usual case) is broadcast along the positions; several are gathered.
    """
    length, steps = ops.shape(buffer)[2], ops.shape(update)[2]
    offsets = ops.arange(length) - index  # position p takes update[p - index]
    written = ops.logical_and(offsets >= 0, offsets < steps)
    if update.shape[2] != 1:
        update = ops.take(update, ops.clip(offsets, 0, steps - 1), axis=2)
    return ops.where(written[None, None, :, None], update, buffer)


def _softmax_over_keys(logits):
    """`softmax(logits)` over the last axis. Over a single key (a one-token
    sequence) that is 1, written out: Keras's softmax warns on size-1 axes."""
    if logits.shape[-1] == 1:
        return ops.ones_like(logits)
    return ops.softmax(logits, axis=-1)


@keras.saving.register_keras_serializable(package="keras_transformer")
class CachedMultiHeadAttention(keras.layers.Layer):
    """Multi-head attention: softmax(QKᵀ/√d_k)V over `num_heads` heads.

    Queries, keys and values are projected to `num_heads` heads of size
    `key_dim` (queries, keys) and `value_dim` (values); each head computes
    scaled dot-product attention; the heads are concatenated and projected
    back to the query's feature size (or `output_dim`). The softmax is
    computed in float32 under any dtype policy.

    Not Keras's `keras.layers.MultiHeadAttention`: this layer adds cached
    incremental decoding and zero outputs for fully masked rows, and takes
    only the constructor arguments below.

    Masking: a key is attended to only where every given mask allows it.
    Masks are boolean, `True` meaning "may attend": `attention_mask`
    `(batch, query_len, key_len)`, the Keras masks of `query`, `value` and
    `key` (propagated automatically, or passed as `query_mask`/`value_mask`/
    `key_mask`), and a causal mask with `use_causal_mask=True`. A query row
    whose keys are all hidden returns zeros (never NaN).

    Besides `call` (the full pass), three methods serve decoding and plots;
    a cache is a dict `{"key": (batch, num_heads, length, key_dim),
    "value": (batch, num_heads, length, value_dim)}`, a memory a dict
    `{"transposed_key": (batch, num_heads, key_dim, length), "value": ...}`:

    * `call_with_cache(query, cache, index)`: causal self-attention of new
      positions `index, index + 1, ...` over a fixed-size cache
      (`initial_cache`), which it returns with their keys and values written;
    * `call_with_memory(query, memory, memory_mask)`: attention over keys and
      values projected once (`project_memory`), e.g. an encoder output; the
      query rows may be a multiple of the memory's batch (beams of a
      sentence, rows together), and share its one copy;
    * `attention_scores(...)`: the attention probabilities of `call`.

    Args:
        num_heads: number of attention heads, `h` in the paper.
        key_dim: size of each query/key head, `d_k`.
        value_dim: size of each value head, `d_v`. Defaults to `key_dim`.
        dropout: dropout rate on the attention probabilities.
        use_bias: whether the four projections have biases.
        output_dim: feature size of the output. Defaults to the query's.
        kernel_initializer: initializer of the projection kernels.
        bias_initializer: initializer of the projection biases.
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
        use_causal_mask: whether query `i` may only see keys `j <= i`.
        training: whether dropout is active.

    Returns:
        `(batch, query_len, output_dim)`.

    Example:

    >>> layer = CachedMultiHeadAttention(num_heads=8, key_dim=64)
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
        output_dim=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed=None,
        **kwargs,
    ):
        _validation.check_positive_int(num_heads=num_heads, key_dim=key_dim)
        _validation.check_rate(dropout=dropout)
        _validation.check_positive_int(allow_none=True, value_dim=value_dim, output_dim=output_dim)
        super().__init__(**kwargs)
        self.supports_masking = True
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim if value_dim is not None else key_dim
        self.dropout = dropout
        self.seed = seed  # of the dropout
        self.use_bias = use_bias
        self.output_dim = output_dim
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def _dense(self, units, input_dim, name):
        layer = keras.layers.Dense(
            units,
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
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
            self.output_dim or query_shape[-1], heads * self.value_dim, "output"
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
        use_causal_mask=False,
        training=None,
    ):
        memory = self.project_memory(value, key)
        mask = self._attention_mask(
            query, memory, query_mask, value_mask, key_mask, attention_mask, use_causal_mask
        )
        queries = self._project_query(query)
        return self._attend(queries, memory["transposed_key"], memory["value"], mask, training)

    def _project_query(self, query):
        """`(batch, query_len, features)` to scaled per-head queries `(batch,
        num_heads, query_len, key_dim)`; scaling q is cheaper than the logits."""
        queries = self._split_heads(self.query_dense(query), self.key_dim)
        return queries * ops.cast(1.0 / math.sqrt(self.key_dim), queries.dtype)

    def project_memory(self, value, key=None):
        """Per-head keys and values of `value` (and `key`, default `value`),
        the memory `call_with_memory` attends to (for a decoder: the encoder
        output, projected once): `{"transposed_key": (batch, num_heads,
        key_dim, key_len), "value": (batch, num_heads, key_len, value_dim)}`.

        The keys are kept as Kᵀ, so that every decoding step multiplies QKᵀ
        as the matrices lie: on XLA:CPU, the beams' grouped queries against
        keys stored by position made the slowest of the attention products.
        """
        require_built(self, "project_memory")
        memory = self._keys_and_values(value, value if key is None else key)
        return {"transposed_key": ops.swapaxes(memory["key"], -1, -2), "value": memory["value"]}

    def _keys_and_values(self, value, key):
        """Per-head keys and values by position: `{"key": (batch, num_heads,
        key_len, key_dim), "value": (batch, num_heads, key_len, value_dim)}`."""
        return {
            "key": self._split_heads(self.key_dense(key), self.key_dim),
            "value": self._split_heads(self.value_dense(value), self.value_dim),
        }

    def _split_heads(self, x, head_dim):
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (batch, length, self.num_heads, head_dim))
        return ops.transpose(x, (0, 2, 1, 3))  # (batch, heads, seq, depth)

    def _attention_mask(
        self, query, memory, query_mask, value_mask, key_mask, attention_mask, use_causal_mask
    ):
        """Merges every mask into one boolean `(batch|1, q_len, k_len)`."""
        if query_mask is not None:
            query_mask = ops.expand_dims(query_mask, -1)  # (batch, q, 1)
        if value_mask is not None:
            value_mask = ops.expand_dims(value_mask, -2)  # (batch, 1, k)
        if key_mask is not None:
            key_mask = ops.expand_dims(key_mask, -2)  # (batch, 1, k)
        causal = None
        if use_causal_mask:
            key_length = ops.shape(memory["value"])[2]
            causal = ops.expand_dims(causal_mask(ops.shape(query)[1], key_length), 0)
        return merge_masks(query_mask, value_mask, key_mask, attention_mask, causal)

    def _probabilities(self, queries, transposed_keys, mask):
        """softmax(QKᵀ) `(batch, heads, q, k)` (queries already scaled),
        zero where `mask` `(batch|1, q, k)` hides every key of a query."""
        logits = ops.matmul(queries, transposed_keys)  # (b, h, q, k)
        logits = ops.cast(logits, "float32")
        if mask is None:
            return ops.cast(_softmax_over_keys(logits), self.compute_dtype)
        mask = ops.expand_dims(mask, 1)  # (batch, 1, q, k)
        scores = _softmax_over_keys(ops.where(mask, logits, _MASKED_LOGIT))
        scores = scores * ops.cast(ops.any(mask, axis=-1, keepdims=True), scores.dtype)
        return ops.cast(scores, self.compute_dtype)

    def _attend(self, queries, transposed_keys, values, mask, training):
        """The heads' weighted values, concatenated and projected: the
        output `(batch, q_len, output_dim)`."""
        scores = self._probabilities(queries, transposed_keys, mask)
        context = ops.matmul(self.dropout_layer(scores, training=training), values)
        batch, length = ops.shape(context)[0], ops.shape(context)[2]
        context = ops.transpose(context, (0, 2, 1, 3))  # (batch, q, heads, dv)
        context = ops.reshape(context, (batch, length, self.num_heads * self.value_dim))
        output = self.output_dense(context)
        if mask is None:
            return output
        # A query row with no visible key attends to nothing.
        return output * ops.cast(ops.any(mask, axis=-1, keepdims=True), output.dtype)

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
        memory = self.project_memory(value, key)
        mask = self._attention_mask(
            query, memory, query_mask, value_mask, key_mask, attention_mask, use_causal_mask
        )
        return self._probabilities(self._project_query(query), memory["transposed_key"], mask)

    def initial_cache(self, batch_size, length):
        """An empty self-attention cache for `length` positions: zeros
        `{"key": (batch_size, num_heads, length, key_dim), "value": ...}`."""
        shape = (batch_size, self.num_heads, length)
        return {
            "key": ops.zeros(shape + (self.key_dim,), self.compute_dtype),
            "value": ops.zeros(shape + (self.value_dim,), self.compute_dtype),
        }

    def call_with_cache(self, query, cache, index):
        """Causal self-attention of `query` `(batch, steps, features)`, the
        positions `index .. index + steps - 1`, over `cache` (from
        `initial_cache`), with their own keys and values written into it.

        Each position sees the cache up to itself, so feeding a sequence in
        pieces gives `call(x, x, use_causal_mask=True)` of the whole.

        Returns:
            `(output, cache)`: `(batch, steps, output_dim)` and the cache with
            these positions written (same shapes).
        """
        check_cache_keys(cache, "cache", ("key", "value"))
        if index is None:
            raise ValueError(
                "`call_with_cache` needs `index`, the position of `query[:, 0]` "
                "in the cache. Received: index=None"
            )
        if not self.built:
            self.build(query.shape, query.shape)
        new = self._keys_and_values(query, query)
        cache = {name: _write_at(cache[name], new[name], index) for name in ("key", "value")}
        steps, length = ops.shape(query)[1], ops.shape(cache["key"])[2]
        mask = ops.expand_dims(causal_mask(steps, length, index), 0)  # (1, steps, length)
        queries, keys = self._project_query(query), ops.swapaxes(cache["key"], -1, -2)
        return self._attend(queries, keys, cache["value"], mask, training=False), cache

    def call_with_memory(self, query, memory, memory_mask=None):
        """Attention of `query` `(rows, steps, features)` over `memory` (from
        `project_memory`, batch `sentences`), hiding the memory positions
        where `memory_mask` `(sentences, key_len)` is `False`.

        `rows` may be `sentences` or a multiple of it: rows `i * g .. i * g +
        g - 1` then all attend to sentence `i` (the beams of a sentence in
        a beam search), as `g * steps` queries of one attention, over one
        copy of its keys and values.

        Returns:
            `(rows, steps, output_dim)`.
        """
        check_cache_keys(memory, "memory", ("transposed_key", "value"))
        rows, sentences = query.shape[0], memory["value"].shape[0]
        if rows is not None and sentences is not None and rows % sentences:
            raise ValueError(
                f"`query` must have a multiple of the memory's {sentences} rows (the beams of "
                f"a sentence together). Received: query with {rows} rows"
            )
        steps, features = ops.shape(query)[1], query.shape[-1]
        grouped = ops.reshape(query, (ops.shape(memory["value"])[0], -1, features))
        mask = None if memory_mask is None else ops.expand_dims(memory_mask, 1)  # (s, 1, k)
        queries = self._project_query(grouped)
        output = self._attend(
            queries, memory["transposed_key"], memory["value"], mask, training=False
        )
        return ops.reshape(output, (ops.shape(query)[0], steps, output.shape[-1]))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout": self.dropout,
                "seed": self.seed,
                "use_bias": self.use_bias,
                "output_dim": self.output_dim,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config

    def compute_output_spec(self, query, value, key=None, **unused):
        # The masks and `training` change no shape.
        return keras.KerasTensor(
            query.shape[:-1] + (self.output_dim or query.shape[-1],), dtype=self.compute_dtype
        )

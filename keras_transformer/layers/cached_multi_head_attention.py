"""Multi-head scaled dot-product attention (Vaswani et al., 2017, §3.2)."""

import math

import keras
from keras import ops

from keras_transformer import _validation
from keras_transformer.layers._utils import clone_initializer
from keras_transformer.layers._utils import sublayer_seed
from keras_transformer.layers.masking import causal_mask
from keras_transformer.layers.masking import merge_masks

# Logit given to hidden keys. Finite (not -inf) so that a row whose keys are
# all hidden gives a uniform softmax instead of NaN; that row is then zeroed.
_MASKED_LOGIT = -1e9


def _write_at(cache, update, index):
    """`cache` `(batch, heads, length, depth)` with `update` `(batch, heads,
    steps, depth)` written at positions `index .. index + steps - 1`.

    Places the update with a one-hot product and selects, rather than using
    `ops.slice_update`: on TensorFlow that lowers to `XlaDynamicUpdateSlice`,
    which runs only where TensorFlow's XLA JIT is linked and enabled (stock
    TF Serving leaves XLA:CPU off), so an exported model would depend on it.
    The product is exact (each value is multiplied by 1 and added to 0s) and
    compiles under XLA, unlike a pad by a tensor amount.
    """
    length, steps = ops.shape(cache)[2], ops.shape(update)[2]
    targets = ops.expand_dims(index + ops.arange(steps), 1)  # (steps, 1)
    one_hot = ops.equal(targets, ops.expand_dims(ops.arange(length), 0))  # (steps, length)
    placed = ops.einsum("bhtd,tl->bhld", update, ops.cast(one_hot, update.dtype))
    written = ops.any(one_hot, axis=0)  # (length,)
    return ops.where(written[None, None, :, None], placed, cache)


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

    Not Keras's `keras.layers.MultiHeadAttention`: this layer adds a
    fixed-shape key/value cache for incremental decoding and zero outputs
    for fully masked rows, and takes only the constructor arguments below.

    Masking: a key is attended to only where every given mask allows it.
    Masks are boolean, `True` meaning "may attend": `attention_mask`
    `(batch, query_len, key_len)`, the Keras masks of `query`, `value` and
    `key` (propagated automatically, or passed as `query_mask`/`value_mask`/
    `key_mask`), and a causal mask with `use_causal_mask=True`. A query row
    whose keys are all hidden returns zeros (never NaN).

    Incremental decoding: pass `cache=(key_cache, value_cache)`, each
    `(batch, num_heads, cache_len, head_dim)` (see `project_key_value`).
    With `cache_update_index=i`, the keys/values of `value`/`key` are
    written into the cache at positions `i, i+1, ...` and the query attends
    to the whole cache (with `use_causal_mask=True`, only to positions up to
    its own); this is decoder self-attention. Without `cache_update_index`
    the cache is used as the keys/values as they are, which is
    encoder-decoder attention over keys computed once per source
    (`value_mask` then describes the cache positions). When writing into a
    cache, the masks of `value`/`key` are ignored; pass `attention_mask` of
    shape `(batch, query_len, cache_len)` to hide cache positions.

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
        use_causal_mask: whether query `i` may only see keys `j <= i`
            (offset by `cache_update_index` when decoding with a cache).
        return_attention_scores: also return the attention probabilities
            `(batch, num_heads, query_len, key_len)`.
        training: whether dropout is active.
        cache: optional `(key_cache, value_cache)` tuple, see above.
        cache_update_index: int or scalar tensor, where to write in `cache`.

    Returns:
        `output` `(batch, query_len, output_dim)`; `(output, scores)` if
        `return_attention_scores`; with a `cache`, the (updated) cache is
        appended: `(output, cache)` or `(output, scores, cache)`.

    Example:

    >>> layer = CachedMultiHeadAttention(num_heads=8, key_dim=64)
    >>> x = keras.random.normal((2, 10, 512))
    >>> layer(x, x, use_causal_mask=True).shape
    TensorShape([2, 10, 512])
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

    def _split_heads(self, x, head_dim):
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (batch, length, self.num_heads, head_dim))
        return ops.transpose(x, (0, 2, 1, 3))  # (batch, heads, seq, depth)

    def project_key_value(self, value, key=None):
        """Projects `value` (and `key`, default `value`) into per-head keys
        and values, `(batch, num_heads, key_len, head_dim)` each.

        This is the `cache` format: encoder-decoder attention computes it
        once per source; a self-attention cache starts as zeros of the same
        shape with `cache_len` positions.
        """
        key = value if key is None else key
        keys = self._split_heads(self.key_dense(key), self.key_dim)
        values = self._split_heads(self.value_dense(value), self.value_dim)
        return keys, values

    def _attention_mask(
        self,
        query_length,
        key_length,
        query_mask,
        value_mask,
        key_mask,
        attention_mask,
        use_causal_mask,
        causal_offset,
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
            causal = ops.expand_dims(
                causal_mask(query_length, key_length, causal_offset), 0
            )  # (1, q, k)
        return merge_masks(query_mask, value_mask, key_mask, attention_mask, causal)

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
        return_attention_scores=False,
        training=None,
        cache=None,
        cache_update_index=None,
    ):
        queries = self._split_heads(self.query_dense(query), self.key_dim)
        if cache is not None and cache_update_index is None:
            keys, values = cache  # precomputed, e.g. encoder-decoder attention
        else:
            keys, values = self.project_key_value(value, key)
            if cache is not None:
                keys = _write_at(cache[0], keys, cache_update_index)
                values = _write_at(cache[1], values, cache_update_index)
                cache = (keys, values)
        if cache_update_index is not None:
            value_mask = key_mask = None  # they describe `value`, not the cache

        mask = self._attention_mask(
            ops.shape(queries)[2],
            ops.shape(keys)[2],
            query_mask,
            value_mask,
            key_mask,
            attention_mask,
            use_causal_mask,
            0 if cache_update_index is None else cache_update_index,
        )

        # Scaling q before the product is cheaper than scaling the logits.
        queries = queries * ops.cast(1.0 / math.sqrt(self.key_dim), queries.dtype)
        logits = ops.matmul(queries, ops.swapaxes(keys, -1, -2))  # (b, h, q, k)
        logits = ops.cast(logits, "float32")
        if mask is not None:
            mask = ops.expand_dims(mask, 1)  # (batch, 1, q, k)
            logits = ops.where(mask, logits, _MASKED_LOGIT)
        scores = _softmax_over_keys(logits)
        if mask is not None:
            # A query row with no visible key attends to nothing.
            has_key = ops.any(mask, axis=-1, keepdims=True)  # (b, 1, q, 1)
            scores = scores * ops.cast(has_key, scores.dtype)
        scores = ops.cast(scores, self.compute_dtype)
        context = ops.matmul(
            self.dropout_layer(scores, training=training), values
        )  # (batch, heads, q, value_dim)

        batch, length = ops.shape(context)[0], ops.shape(context)[2]
        context = ops.transpose(context, (0, 2, 1, 3))  # (batch, q, heads, dv)
        context = ops.reshape(context, (batch, length, self.num_heads * self.value_dim))
        output = self.output_dense(context)
        if mask is not None:
            has_key = ops.cast(ops.squeeze(has_key, 1), output.dtype)  # (b|1, q, 1)
            output = output * has_key

        outputs = (output,)
        if return_attention_scores:
            outputs += (scores,)
        if cache is not None:
            outputs += (cache,)
        return outputs[0] if len(outputs) == 1 else outputs

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

    def compute_output_spec(
        self, query, value, key=None, return_attention_scores=False, cache=None, **unused
    ):
        # The masks, `training` and `cache_update_index` change no shape.
        key_len = value.shape[1] if cache is None else cache[0].shape[2]
        output = keras.KerasTensor(
            query.shape[:-1] + (self.output_dim or query.shape[-1],),
            dtype=self.compute_dtype,
        )
        outputs = (output,)
        if return_attention_scores:
            outputs += (
                keras.KerasTensor(
                    (query.shape[0], self.num_heads, query.shape[1], key_len),
                    dtype=self.compute_dtype,
                ),
            )
        if cache is not None:
            outputs += (tuple(keras.KerasTensor(c.shape, dtype=c.dtype) for c in cache),)
        return outputs[0] if len(outputs) == 1 else outputs

"""NumPy implementations of the paper's formulas, written independently of
the package, that the tests compare the layers against."""

import numpy as np


def softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def dense(x, layer):
    """`x @ kernel + bias` with a Keras `Dense` layer's weights, or an
    attention projection's (an `EinsumDense`, whose kernel's leading axes
    multiply `x`'s last: `(features, heads, depth)` read as `(features,
    heads * depth)`, `(heads, depth, features)` as `(heads * depth,
    features)`), the output axes flattened."""
    y = x @ np.asarray(layer.kernel).reshape(x.shape[-1], -1)
    if layer.bias is not None:
        y = y + np.asarray(layer.bias).reshape(-1)
    return y


def layer_norm(x, layer):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + layer.epsilon)
    return y * np.asarray(layer.gamma) + np.asarray(layer.beta)


def attention(query, value, layer, mask=None):
    """softmax(QKᵀ/√d_k)V over heads, then the output projection.

    `mask` is boolean `(batch, q_len, k_len)`; a row with no visible key
    gives zeros.
    """
    h, dk, dv = layer.num_heads, layer.key_dim, layer.value_dim
    b, q_len, k_len = query.shape[0], query.shape[1], value.shape[1]
    q = dense(query, layer.query_dense).reshape(b, q_len, h, dk)
    k = dense(value, layer.key_dense).reshape(b, k_len, h, dk)
    v = dense(value, layer.value_dense).reshape(b, k_len, h, dv)
    out = np.zeros((b, q_len, h, dv))
    for bi in range(b):
        for hi in range(h):
            logits = q[bi, :, hi] @ k[bi, :, hi].T / np.sqrt(dk)
            if mask is not None:
                logits = np.where(mask[bi], logits, -np.inf)
            with np.errstate(invalid="ignore"):
                weights = softmax(logits)
            weights = np.nan_to_num(weights)  # fully masked rows -> 0
            out[bi, :, hi] = weights @ v[bi, :, hi]
    y = dense(out.reshape(b, q_len, h * dv), layer.output_dense)
    if mask is not None:
        y = y * mask.any(-1, keepdims=True)
    return y


def feed_forward(x, layer):
    return dense(np.maximum(dense(x, layer.inner_dense), 0.0), layer.output_dense)


def sinusoid(length, depth, start=0):
    """PE(pos, 2i) = sin(pos/10000^(2i/d)), PE(pos, 2i+1) = cos(...)."""
    pe = np.zeros((length, depth))
    for pos in range(start, start + length):
        for i in range(0, depth, 2):
            angle = pos / 10000 ** (i / depth)
            pe[pos - start, i] = np.sin(angle)
            if i + 1 < depth:
                pe[pos - start, i + 1] = np.cos(angle)
    return pe


def residual(layer, x, fn, norm):
    """LayerNorm(x + fn(x)) (post-norm) or x + fn(LayerNorm(x)) (pre-norm)."""
    if layer.norm_first:
        return x + fn(layer_norm(x, norm))
    return layer_norm(x + fn(x), norm)


def encoder_layer(x, layer, key_mask=None):
    """The paper's post-norm (or pre-norm) encoder layer, dropout off."""
    mask = None
    if key_mask is not None:
        mask = np.broadcast_to(key_mask[:, None, :], (x.shape[0], x.shape[1], x.shape[1]))

    x = residual(
        layer, x, lambda y: attention(y, y, layer.self_attention, mask), layer.self_attention_norm
    )
    return residual(
        layer, x, lambda y: feed_forward(y, layer.feed_forward), layer.feed_forward_norm
    )


def decoder_layer(x, memory, layer, memory_mask=None):
    """The paper's decoder layer (causal self-attention), dropout off."""
    b, t, s = x.shape[0], x.shape[1], memory.shape[1]
    causal = np.broadcast_to(np.tril(np.ones((t, t), bool)), (b, t, t))
    cross = None
    if memory_mask is not None:
        cross = np.broadcast_to(memory_mask[:, None, :], (b, t, s))

    x = residual(
        layer, x, lambda y: attention(y, y, layer.self_attention, causal), layer.self_attention_norm
    )
    x = residual(
        layer,
        x,
        lambda y: attention(y, memory, layer.cross_attention, cross),
        layer.cross_attention_norm,
    )
    return residual(
        layer, x, lambda y: feed_forward(y, layer.feed_forward), layer.feed_forward_norm
    )

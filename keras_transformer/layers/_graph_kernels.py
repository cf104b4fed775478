"""Where a TensorFlow graph has a faster stock kernel than the one
`keras.ops` reaches: the attention products, their softmax and the
decoding cache's write. A SavedModel runs these as TF Serving does (a plain graph, no XLA),
so they decide the served speed.

Each function here is the `keras.ops` computation it replaces, with the
same result; the layers call it only on TensorFlow, outside XLA
(`_backend.compiling_with_xla`) and not for a converter to another
runtime (`_backend.tracing_for_conversion`), where the kernel is used.
"""

import keras
from keras import ops

from keras_transformer import _backend
from keras_transformer.layers._utils import size


def uses_graph_kernels(dtype):
    """Whether the layers should use this module for tensors of `dtype`:
    TensorFlow, outside XLA, float32 (in bfloat16, oneDNN's kernels are
    the fast ones), and not for a converter to another runtime (which has
    no `TensorStridedSliceUpdate`)."""
    return (
        _backend.is_tensorflow()
        and keras.backend.standardize_dtype(dtype) == "float32"
        and not _backend.compiling_with_xla()
        and not _backend.tracing_for_another_runtime()
    )


def batch_matmul(a, b, transpose_b=False):
    """`keras.ops.matmul(a, b)` of two `(..., m, k)`, `(..., k, n)` float32
    tensors (`b` `(..., n, k)` with `transpose_b`, read transposed as it
    lies) as `BatchMatMulV3`, TensorFlow's own kernel. On x86 a graph
    rewrite puts oneDNN's kernel in place of the `BatchMatMulV2` that
    `tf.matmul` emits; oneDNN runs the many small products of attention
    in a decoding step (one query per row and head) about half as fast."""
    import tensorflow as tf

    return tf.raw_ops.BatchMatMulV3(x=a, y=b, Tout=a.dtype, adj_y=transpose_b)


def softmax(logits):
    """`keras.ops.softmax(logits, axis=-1)` of float32 logits as `exp(x -
    max) / sum`: a graph rewrite puts oneDNN's kernel in place of
    TensorFlow's `Softmax` on x86, and for the small softmaxes of a
    decoding step (one query per row and head) its cost per call is
    several times the arithmetic."""
    import tensorflow as tf

    exp = tf.exp(logits - tf.reduce_max(logits, axis=-1, keepdims=True))
    return exp / tf.reduce_sum(exp, axis=-1, keepdims=True)


def strided_write(buffer, update, index):
    """`_cache.write_at` as a `TensorStridedSliceUpdate` over a `(batch *
    heads, length * depth)` view of the buffer: a stock op (not
    `XlaDynamicUpdateSlice`, which runs only where TensorFlow's XLA JIT is
    linked and enabled, as stock TF Serving on a CPU does not) whose kernel
    writes into the buffer itself when nothing else holds it (the buffer a
    beam search has just reordered, a loop's own state) and into a copy
    otherwise, where the select it replaces copies the whole buffer."""
    import tensorflow as tf

    batch, heads, length, depth = (size(buffer, axis) for axis in range(4))
    steps = size(update, 2)
    begin = tf.stack([0, index * depth])
    written = tf.raw_ops.TensorStridedSliceUpdate(
        input=tf.reshape(buffer, [-1, length * depth]),  # (batch * heads, positions)
        begin=begin,
        end=begin + tf.stack([0, steps * depth]),
        strides=[1, 1],
        value=tf.reshape(update, [-1, steps * depth]),
        begin_mask=1,  # every row
        end_mask=1,
    )
    return tf.reshape(written, [batch, heads, length, depth])


def attention_matmul(a, b, transpose_b=False):
    """The attention products, `ops.matmul` (of `b` transposed in its last
    two axes, with `transpose_b`); in a TensorFlow graph, `batch_matmul`,
    which reads `b` transposed as it lies."""
    if uses_graph_kernels(a.dtype):
        return batch_matmul(a, b, transpose_b)
    return ops.matmul(a, ops.swapaxes(b, -1, -2) if transpose_b else b)


def attention_softmax(logits):
    """The attention softmax over the keys, `ops.softmax`; for one query
    (a decoding step) in a TensorFlow graph, `softmax`."""
    if logits.shape[2] == 1 and uses_graph_kernels(logits.dtype):
        return softmax(logits)
    return ops.softmax(logits, axis=-1)

"""The FLOP model of the workload, and the machine's matmul ceiling.

Training FLOPs per step = 6 x ((encoder matmul weights + the
cross-attention's key and value projections) x source tokens + (the
decoder's other matmul weights + output projection) x target tokens) +
attention (QK^T and AV, forward and backward); decoding FLOPs count the
forward pass the same way. The ceiling is the best GFLOP/s of a 2048^3 matmul in
TensorFlow or, where installed, PyTorch.
"""

from comparison.measure import quiet_tensorflow
from comparison.measure import time_calls
from comparison.workload import SOURCE_LEN
from comparison.workload import TARGET_LEN
from comparison.workload import TRAIN_BATCH


def matmul_weights(cfg):
    """`(encoder, decoder, output projection)` matmul weight counts."""
    d, f = cfg["d_model"], cfg["d_ff"]
    encoder = cfg["layers"] * (4 * d * d + 2 * d * f)
    decoder = cfg["layers"] * (8 * d * d + 2 * d * f)
    return encoder, decoder, cfg["vocab"] * d


def train_flops(cfg, batch=TRAIN_BATCH, source_len=SOURCE_LEN, target_len=TARGET_LEN):
    """FLOPs of one training step on `batch` sentences of `source_len`
    source and `target_len` target tokens (default: the workload's)."""
    encoder, decoder, logits = matmul_weights(cfg)
    b, s, t, d, n = batch, source_len, target_len, cfg["d_model"], cfg["layers"]
    cross_kv = n * 2 * d * d  # projections of the source, in the decoder
    dense = 6 * ((encoder + cross_kv) * b * s + (decoder - cross_kv + logits) * b * t)
    attention = 3 * 4 * b * d * n * (s * s + t * t + t * s)  # fwd + 2x bwd
    return dense + attention


def decode_flops(cfg, shape):
    """FLOPs of decoding `shape` (one of `workload.DECODE_SHAPES`): its
    sentences, with `beam` rows each."""
    encoder, decoder, logits = matmul_weights(cfg)
    d, n = cfg["d_model"], cfg["layers"]
    b, s, steps = shape["batch"], shape["source_len"], shape["steps"]
    rows = b * shape["beam"]
    cross_kv = n * 2 * d * d  # projected once per source
    flops = 2 * b * s * (encoder + cross_kv)
    flops += 2 * rows * steps * (decoder - cross_kv + logits)
    attention = sum(4 * d * n * ((t + 1) + s) for t in range(steps))
    return flops + rows * attention


def worker_ceiling(spec):
    """Best GFLOP/s of an n x n matmul, TensorFlow and (if installed) PyTorch."""
    quiet_tensorflow()
    import numpy as np
    import tensorflow as tf

    n, repeats = 2048, 10
    flops = 2 * n**3
    results = {}
    dtype = {"fp32": tf.float32, "bf16": tf.bfloat16}[spec["precision"]]
    a = tf.constant(np.random.rand(n, n), dtype)
    b = tf.constant(np.random.rand(n, n), dtype)
    matmul = tf.function(lambda a, b: tf.matmul(a, b))
    times = time_calls(lambda: matmul(a, b).numpy(), 2, repeats)
    results["tensorflow"] = flops / min(times) / 1e9
    try:
        import torch
    except ImportError:
        pass
    else:
        tdtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[spec["precision"]]
        x = torch.rand(n, n, dtype=tdtype)
        y = torch.rand(n, n, dtype=tdtype)
        times = time_calls(lambda: torch.mm(x, y), 2, repeats)
        results["torch"] = flops / min(times) / 1e9
    return {"gflops": max(results.values()), "by_library": results}

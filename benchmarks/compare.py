"""Ours against keras-hub, PyTorch and CTranslate2 on identical work.

    pip install -e ".[bench]"
    python benchmarks/compare.py --config tiny      # or small, base
    python benchmarks/compare.py --config tiny --only ours keras_hub --json out.json

The work is the same for every implementation: a post-norm Transformer
with ReLU feed-forward layers, sinusoidal positions, dropout 0.1 and one
embedding shared by the source, the target and the output projection.

* training: one step on 128 sentences of 32 source and 32 target tokens
  (4,096 target tokens), Adam, label smoothing 0.1; fp32 and
  `mixed_bfloat16` (PyTorch: bf16 autocast).
* decoding: 64 sentences of 32 source tokens, exactly 40 decoding steps
  each (EOS is forbidden until the last step, so every implementation does
  the same work), greedy and beam 4.

Every measurement runs in a fresh Python subprocess, so imports, thread
pools, allocators and XLA caches never leak from one into the next. A
measurement runs `--warmup` untimed steps (tracing, compilation), then
`--steps` timed ones, and reports the median. The fp32 and bf16 matmul
ceilings (the best GFLOP/s of large square matmuls, TensorFlow and PyTorch
where installed) are measured at the start and at the end; "% ceiling" uses
their mean, which shows how much the machine drifted.

Training FLOPs per step = 6 x (encoder matmul weights x source tokens +
(decoder matmul weights + output projection) x target tokens) + attention
(QK^T and AV, forward and backward); decoding FLOPs count the forward pass
the same way. Peak memory is the worker process's peak resident set size.

Peers that are not installed are skipped and listed. Also reported:
bf16 sanity (the loss after 200 steps of a copy task, bf16 vs fp32) and
memory growth of our decoder over `--memory_calls` calls.
"""

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

CONFIGS = {
    "tiny": dict(vocab=8000, d_model=256, layers=3, heads=4, d_ff=1024),
    "small": dict(vocab=16000, d_model=512, layers=3, heads=8, d_ff=2048),
    "base": dict(vocab=37000, d_model=512, layers=6, heads=8, d_ff=2048),
}
TRAIN_BATCH, SOURCE_LEN, TARGET_LEN = 128, 32, 32
DECODE_BATCH, DECODE_SOURCE_LEN, DECODE_STEPS = 64, 32, 40
BEAM = 4
DROPOUT, LABEL_SMOOTHING = 0.1, 0.1
PAD, BOS, EOS, FIRST_ID = 0, 2, 3, 4  # keras_transformer.special_ids

PEER_MODULES = {"keras_hub": "keras_hub", "torch": "torch", "ctranslate2": "ctranslate2"}


# ---------------------------------------------------------------------------
# FLOP counts.


def matmul_weights(cfg):
    d, f = cfg["d_model"], cfg["d_ff"]
    encoder = cfg["layers"] * (4 * d * d + 2 * d * f)
    decoder = cfg["layers"] * (8 * d * d + 2 * d * f)
    return encoder, decoder, cfg["vocab"] * d


def train_flops(cfg):
    encoder, decoder, logits = matmul_weights(cfg)
    b, s, t, d, n = TRAIN_BATCH, SOURCE_LEN, TARGET_LEN, cfg["d_model"], cfg["layers"]
    dense = 6 * (encoder * b * s + (decoder + logits) * b * t)
    attention = 3 * 4 * b * d * n * (s * s + t * t + t * s)  # fwd + 2x bwd
    return dense + attention


def decode_flops(cfg, beam):
    encoder, decoder, logits = matmul_weights(cfg)
    d, n = cfg["d_model"], cfg["layers"]
    b, s, steps = DECODE_BATCH, DECODE_SOURCE_LEN, DECODE_STEPS
    rows = b * beam
    cross_kv = n * 2 * d * d  # projected once per source
    flops = 2 * b * s * (encoder + cross_kv)
    flops += 2 * rows * steps * (decoder - cross_kv + logits)
    attention = sum(4 * d * n * ((t + 1) + s) for t in range(steps))
    return flops + rows * attention


# ---------------------------------------------------------------------------
# Workers: each runs in its own subprocess and returns a dict.


def _peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _time(step, warmup, steps):
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def _batches(cfg, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    source = rng.integers(FIRST_ID, cfg["vocab"], (TRAIN_BATCH, SOURCE_LEN), dtype=np.int32)
    target = rng.integers(FIRST_ID, cfg["vocab"], (TRAIN_BATCH, TARGET_LEN + 1), dtype=np.int32)
    target[:, 0] = BOS
    return source, target[:, :-1], target[:, 1:]


def _decode_sources(cfg, seed=1):
    import numpy as np

    rng = np.random.default_rng(seed)
    return rng.integers(FIRST_ID, cfg["vocab"], (DECODE_BATCH, DECODE_SOURCE_LEN), dtype=np.int32)


def _quiet_tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def worker_ceiling(spec):
    """Best GFLOP/s of an n x n matmul, TensorFlow and (if installed) PyTorch."""
    _quiet_tf()
    import numpy as np
    import tensorflow as tf

    n, repeats = 2048, 10
    flops = 2 * n**3
    results = {}
    dtype = {"fp32": tf.float32, "bf16": tf.bfloat16}[spec["precision"]]
    a = tf.constant(np.random.rand(n, n), dtype)
    b = tf.constant(np.random.rand(n, n), dtype)
    matmul = tf.function(lambda a, b: tf.matmul(a, b))
    times = _time(lambda: matmul(a, b).numpy(), 2, repeats)
    results["tensorflow"] = flops / min(times) / 1e9
    try:
        import torch
    except ImportError:
        pass
    else:
        tdtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[spec["precision"]]
        x = torch.rand(n, n, dtype=tdtype)
        y = torch.rand(n, n, dtype=tdtype)
        times = _time(lambda: torch.mm(x, y), 2, repeats)
        results["torch"] = flops / min(times) / 1e9
    return {"gflops": max(results.values()), "by_library": results}


# -- ours ---------------------------------------------------------------------


def _ours_model(cfg, precision, dropout=DROPOUT):
    import keras

    from keras_transformer import Transformer

    if precision == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    return Transformer(
        vocab_size=cfg["vocab"],
        num_layers=cfg["layers"],
        d_model=cfg["d_model"],
        num_heads=cfg["heads"],
        d_ff=cfg["d_ff"],
        dropout=dropout,
        max_length=max(256, DECODE_STEPS),
    )


def _ours_compile(model, cfg, jit_compile="auto", optimizer=None):
    """Compiles as `training.train` does; `optimizer` defaults to the paper's."""
    from keras_transformer.training import compile_for_training

    compile_for_training(model, optimizer, label_smoothing=LABEL_SMOOTHING, jit_compile=jit_compile)


def worker_ours_train(spec):
    _quiet_tf()
    import tensorflow as tf

    cfg = spec["cfg"]
    model = _ours_model(cfg, spec["precision"])
    _ours_compile(model, cfg, spec.get("jit_compile", "auto"))
    source, target_in, target_out = (tf.constant(x) for x in _batches(cfg))
    losses = []

    def step():
        losses.append(float(model.train_on_batch((source, target_in), target_out)))

    times = _time(step, spec["warmup"], spec["steps"])
    return {"times": times, "loss": losses[-1]}


def _ours_searcher(model, search, steps, jit):
    import tensorflow as tf

    from keras_transformer.decoding import beam_search
    from keras_transformer.decoding import greedy_search
    from keras_transformer.decoding.search import NEG_INF

    def step_fn(ids, cache, index):
        logits, cache = model.decode_step(ids, cache, index)
        logits = logits[:, -1]
        # Forbid EOS before the last step, so that every sentence runs to
        # `steps` tokens (the search forces EOS at the limit).
        early = index + 1 < steps
        eos = tf.one_hot(EOS, tf.shape(logits)[-1], on_value=NEG_INF, off_value=0.0)
        return logits + tf.where(early, eos, tf.zeros_like(eos))[None], cache

    @tf.function(jit_compile=jit, input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def run(source):
        batch = tf.shape(source)[0]
        mask = tf.not_equal(source, PAD)
        cache = model.init_cache(model.encode(source), mask, max_length=steps)
        if search == "greedy":
            ids, _ = greedy_search(step_fn, cache, batch, steps)
        else:
            ids, _ = beam_search(step_fn, cache, batch, steps, beam_size=BEAM)
        return ids

    return run


def worker_ours_decode(spec):
    _quiet_tf()
    import numpy as np
    import tensorflow as tf

    cfg = spec["cfg"]
    model = _ours_model(cfg, spec["precision"], dropout=0.0)
    run = _ours_searcher(model, spec["search"], DECODE_STEPS, jit=True)
    source = tf.constant(_decode_sources(cfg))
    shapes = []
    times = _time(lambda: shapes.append(run(source).numpy().shape), spec["warmup"], spec["steps"])
    ids = run(source).numpy()
    lengths = np.sum(ids != PAD, axis=-1)
    return {"times": times, "tokens": int(lengths.sum()), "out_shape": list(shapes[-1])}


def worker_ours_memory(spec):
    """RSS after `calls` decoding calls (greedy and beam alternating, new
    random sources each call) against RSS after the first 100."""
    _quiet_tf()
    import numpy as np
    import tensorflow as tf

    cfg, calls = spec["cfg"], spec["calls"]
    model = _ours_model(cfg, "fp32", dropout=0.0)
    steps = 8
    runs = [_ours_searcher(model, s, steps, jit=True) for s in ("greedy", "beam4")]
    rng = np.random.default_rng(0)
    rss = {}
    start = time.perf_counter()
    for call in range(1, calls + 1):
        source = rng.integers(FIRST_ID, cfg["vocab"], (4, DECODE_SOURCE_LEN), dtype=np.int32)
        runs[call % 2](tf.constant(source)).numpy()
        if call in (100, calls):
            rss[call] = _rss_mib()
    return {
        "calls": calls,
        "rss_after_100_mib": rss[100],
        "rss_after_all_mib": rss[calls],
        "growth_mib": rss[calls] - rss[100],
        "seconds": time.perf_counter() - start,
    }


def _copy_task_loss(spec, make_step):
    """Mean loss of the last 10 of `copy_steps` steps on a copy task (same
    data and initial weights for both precisions)."""
    import numpy as np

    rng = np.random.default_rng(0)
    losses = []
    for _ in range(spec["copy_steps"]):
        source = rng.integers(
            FIRST_ID, spec["copy_vocab"], (64, spec["copy_length"]), dtype=np.int32
        )
        target = np.concatenate([np.full((64, 1), BOS, np.int32), source], axis=1)
        losses.append(make_step(source, target[:, :-1], target[:, 1:]))
    return float(np.mean(losses[-10:])), losses


def worker_ours_copy(spec):
    """The tiny config without dropout on a copy task (vocabulary 30, 8
    tokens) that it learns within 200 steps: Adam at 1e-3 after a 20-step
    linear warm-up. With the settings used before (vocabulary 100, 16
    tokens, 5e-4) the loss was still falling fast at step 200, and the step
    at which a run "finds" the copy moved it by several percent between any
    two runs. Near the label-smoothed floor (0.643 here) the loss still
    spikes from step to step, so one run resolves a few percent, not less
    (benchmarks/README.md)."""
    _quiet_tf()
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    cfg = dict(CONFIGS["tiny"], vocab=spec["copy_vocab"])
    model = _ours_model(cfg, spec["precision"], dropout=0.0)
    warmup, rate = 20, 1e-3
    schedule = keras.optimizers.schedules.PolynomialDecay(rate / warmup, warmup, rate, power=1.0)
    _ours_compile(
        model, cfg, optimizer=keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    )

    def step(source, target_in, target_out):
        return float(
            model.train_on_batch(
                (tf.constant(source), tf.constant(target_in)), tf.constant(target_out)
            )
        )

    final, losses = _copy_task_loss(spec, step)
    return {"final_loss": final, "first_loss": losses[0], "steps": len(losses)}


# -- keras-hub ----------------------------------------------------------------


def _hub_model(cfg, precision, dropout=DROPOUT):
    import keras
    import keras_hub
    from keras import ops

    if precision == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    d = cfg["d_model"]

    class HubTransformer(keras.Model):
        def __init__(self):
            super().__init__()
            self.embedding = keras_hub.layers.ReversibleEmbedding(cfg["vocab"], d, tie_weights=True)
            self.positions = keras_hub.layers.SinePositionEncoding()
            self.embedding_dropout = keras.layers.Dropout(dropout)
            kwargs = dict(
                intermediate_dim=cfg["d_ff"],
                num_heads=cfg["heads"],
                dropout=dropout,
                activation="relu",
            )
            self.encoders = [
                keras_hub.layers.TransformerEncoder(**kwargs) for _ in range(cfg["layers"])
            ]
            self.decoders = [
                keras_hub.layers.TransformerDecoder(**kwargs) for _ in range(cfg["layers"])
            ]

        def embed(self, ids, start_index=0, training=None):
            x = self.embedding(ids) * ops.cast(d**0.5, self.compute_dtype)
            x = x + self.positions(x, start_index=start_index)
            return self.embedding_dropout(x, training=training)

        def encode(self, source, training=None):
            x = self.embed(source, training=training)
            for layer in self.encoders:
                x = layer(x, padding_mask=ops.not_equal(source, PAD), training=training)
            return x

        def call(self, inputs, training=None):
            source, target = inputs
            memory = self.encode(source, training=training)
            y = self.embed(target, training=training)
            for layer in self.decoders:
                y = layer(
                    y, memory, encoder_padding_mask=ops.not_equal(source, PAD), training=training
                )
            return ops.cast(self.embedding(y, reverse=True), "float32")

    model = HubTransformer()
    model((ops.ones((1, 4), "int32"), ops.ones((1, 4), "int32")))
    return model


def smoothed_cross_entropy(y_true, logits):
    """Label-smoothed cross-entropy in plain Keras ops, for keras-hub."""
    from keras import ops

    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    nll = -ops.take_along_axis(log_probs, ops.expand_dims(ops.cast(y_true, "int32"), -1), axis=-1)[
        ..., 0
    ]
    uniform = -ops.mean(log_probs, axis=-1)
    return (1.0 - LABEL_SMOOTHING) * nll + LABEL_SMOOTHING * uniform


def worker_keras_hub_train(spec):
    _quiet_tf()
    import keras
    import tensorflow as tf

    cfg = spec["cfg"]
    model = _hub_model(cfg, spec["precision"])
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=smoothed_cross_entropy,
        jit_compile=spec.get("jit_compile", "auto"),
    )
    source, target_in, target_out = (tf.constant(x) for x in _batches(cfg))
    losses = []

    def step():
        losses.append(float(model.train_on_batch((source, target_in), target_out)))

    times = _time(step, spec["warmup"], spec["steps"])
    return {"times": times, "loss": losses[-1], "jit_compile": spec.get("jit_compile", "auto")}


def worker_keras_hub_decode(spec):
    """Cached greedy decoding with keras-hub's decoder caches, XLA."""
    _quiet_tf()
    import tensorflow as tf
    from keras import ops

    cfg = spec["cfg"]
    model = _hub_model(cfg, spec["precision"], dropout=0.0)
    heads, head_dim = cfg["heads"], cfg["d_model"] // cfg["heads"]
    steps = DECODE_STEPS

    def decoder_step(ids, index, memory, mask, caches, cross_index):
        x = model.embed(ids, start_index=index)
        self_caches, cross_caches = [], []
        for layer, (self_cache, cross_cache) in zip(model.decoders, caches):
            x, self_cache, cross_cache = layer(
                x,
                memory,
                encoder_padding_mask=mask,
                self_attention_cache=self_cache,
                self_attention_cache_update_index=index,
                cross_attention_cache=cross_cache,
                cross_attention_cache_update_index=cross_index,
            )
            self_caches.append(self_cache)
            cross_caches.append(cross_cache)
        logits = ops.cast(model.embedding(x[:, -1], reverse=True), "float32")
        eos = tf.one_hot(EOS, cfg["vocab"], on_value=-1e9, off_value=0.0)
        logits = logits + tf.where(index + 1 < steps, eos, tf.zeros_like(eos))[None]
        return tf.argmax(logits, -1, output_type=tf.int32), list(zip(self_caches, cross_caches))

    @tf.function(jit_compile=True)
    def run(source):
        batch = tf.shape(source)[0]
        mask = tf.not_equal(source, PAD)
        memory = model.encode(source)
        dtype = model.compute_dtype
        caches = [
            (
                tf.zeros([batch, 2, steps, heads, head_dim], dtype),
                tf.zeros([batch, 2, DECODE_SOURCE_LEN, heads, head_dim], dtype),
            )
            for _ in model.decoders
        ]
        first = tf.fill([batch, 1], BOS)
        token, caches = decoder_step(first, 0, memory, mask, caches, 0)
        output = tf.TensorArray(tf.int32, size=steps)
        output = output.write(0, token)

        def body(index, token, caches, output):
            token, caches = decoder_step(token[:, None], index, memory, mask, caches, None)
            return index + 1, token, caches, output.write(index, token)

        _, _, _, output = tf.while_loop(
            lambda index, *_: index < steps, body, (1, token, caches, output)
        )
        return tf.transpose(output.stack())

    source = tf.constant(_decode_sources(cfg))
    times = _time(lambda: run(source).numpy(), spec["warmup"], spec["steps"])
    ids = run(source).numpy()
    return {"times": times, "tokens": int(ids.size)}


# -- PyTorch ------------------------------------------------------------------


def worker_torch_train(spec):
    import math

    import torch
    from torch import nn

    cfg = spec["cfg"]
    torch.manual_seed(0)
    d = cfg["d_model"]

    class TorchTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(cfg["vocab"], d)
            nn.init.normal_(self.embedding.weight, std=d**-0.5)
            self.transformer = nn.Transformer(
                d_model=d,
                nhead=cfg["heads"],
                num_encoder_layers=cfg["layers"],
                num_decoder_layers=cfg["layers"],
                dim_feedforward=cfg["d_ff"],
                dropout=DROPOUT,
                batch_first=True,
            )
            self.dropout = nn.Dropout(DROPOUT)
            position = torch.arange(1024)[:, None]
            rates = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
            table = torch.zeros(1024, d)
            table[:, 0::2] = torch.sin(position * rates)
            table[:, 1::2] = torch.cos(position * rates)
            self.register_buffer("positions", table)

        def embed(self, ids):
            x = self.embedding(ids) * math.sqrt(d) + self.positions[: ids.shape[1]]
            return self.dropout(x)

        def forward(self, source, target):
            causal = nn.Transformer.generate_square_subsequent_mask(target.shape[1])
            pad = source == PAD
            y = self.transformer(
                self.embed(source),
                self.embed(target),
                tgt_mask=causal,
                src_key_padding_mask=pad,
                memory_key_padding_mask=pad,
            )
            return y @ self.embedding.weight.T

    model = TorchTransformer()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    source, target_in, target_out = (torch.from_numpy(x).long() for x in _batches(cfg))
    bf16 = spec["precision"] == "bf16"
    losses = []

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(source, target_in)
        loss = nn.functional.cross_entropy(
            logits.float().reshape(-1, cfg["vocab"]),
            target_out.reshape(-1),
            label_smoothing=LABEL_SMOOTHING,
        )
        loss.backward()
        optimizer.step()
        losses.append(float(loss))

    model.train()
    times = _time(step, spec["warmup"], spec["steps"])
    return {"times": times, "loss": losses[-1], "threads": torch.get_num_threads()}


# -- CTranslate2 --------------------------------------------------------------


def _ctranslate2_model(cfg, directory):
    """A random-weight CTranslate2 model of the same shape."""
    import numpy as np
    from ctranslate2.specs import transformer_spec

    rng = np.random.default_rng(0)
    d, f, v = cfg["d_model"], cfg["d_ff"], cfg["vocab"]
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg["layers"], cfg["layers"]), cfg["heads"], pre_norm=False
    )

    def dense(rows, cols):
        return rng.uniform(
            -((6 / (rows + cols)) ** 0.5), (6 / (rows + cols)) ** 0.5, (rows, cols)
        ).astype(np.float32)

    def linear(spec_linear, rows, cols):
        spec_linear.weight = dense(rows, cols)
        spec_linear.bias = np.zeros(rows, np.float32)

    def norm(spec_norm):
        spec_norm.gamma = np.ones(d, np.float32)
        spec_norm.beta = np.zeros(d, np.float32)

    embedding = rng.normal(0, d**-0.5, (v, d)).astype(np.float32)
    spec.encoder.embeddings[0].weight = embedding
    spec.decoder.embeddings.weight = embedding
    spec.decoder.projection.weight = embedding
    spec.decoder.projection.bias = np.zeros(v, np.float32)
    for layer in spec.encoder.layer:
        norm(layer.self_attention.layer_norm)
        linear(layer.self_attention.linear[0], 3 * d, d)
        linear(layer.self_attention.linear[1], d, d)
        norm(layer.ffn.layer_norm)
        linear(layer.ffn.linear_0, f, d)
        linear(layer.ffn.linear_1, d, f)
    for layer in spec.decoder.layer:
        norm(layer.self_attention.layer_norm)
        linear(layer.self_attention.linear[0], 3 * d, d)
        linear(layer.self_attention.linear[1], d, d)
        norm(layer.attention.layer_norm)
        linear(layer.attention.linear[0], d, d)
        linear(layer.attention.linear[1], 2 * d, d)
        linear(layer.attention.linear[2], d, d)
        norm(layer.ffn.layer_norm)
        linear(layer.ffn.linear_0, f, d)
        linear(layer.ffn.linear_1, d, f)
    tokens = ["<blank>", "<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(FIRST_ID, v)]
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    spec.validate()
    spec.save(directory)
    return tokens


def worker_ctranslate2_decode(spec):
    import ctranslate2

    cfg = spec["cfg"]
    beam = BEAM if spec["search"] == "beam4" else 1
    with tempfile.TemporaryDirectory() as directory:
        tokens = _ctranslate2_model(cfg, directory)
        translator = ctranslate2.Translator(
            directory,
            device="cpu",
            compute_type={"fp32": "float32", "int8": "int8"}[spec["precision"]],
            inter_threads=1,
            intra_threads=os.cpu_count(),
        )
        batch = [[tokens[i] for i in row] for row in _decode_sources(cfg)]
        results = []

        def step():
            results[:] = translator.translate_batch(
                batch,
                beam_size=beam,
                max_batch_size=DECODE_BATCH,
                min_decoding_length=DECODE_STEPS,
                max_decoding_length=DECODE_STEPS,
            )

        times = _time(step, spec["warmup"], spec["steps"])
    lengths = [len(r.hypotheses[0]) for r in results]
    return {"times": times, "tokens": sum(lengths), "lengths": sorted(set(lengths))}


WORKERS = {
    "ceiling": worker_ceiling,
    "ours/train": worker_ours_train,
    "ours/decode": worker_ours_decode,
    "ours/memory": worker_ours_memory,
    "ours/copy": worker_ours_copy,
    "keras_hub/train": worker_keras_hub_train,
    "keras_hub/decode": worker_keras_hub_decode,
    "torch/train": worker_torch_train,
    "ctranslate2/decode": worker_ctranslate2_decode,
}


def run_worker(spec):
    result = WORKERS[spec["worker"]](spec)
    result["peak_rss_mib"] = _peak_rss_mib()
    print("RESULT " + json.dumps(result), flush=True)


# ---------------------------------------------------------------------------
# The driver.


def run_subprocess(spec, timeout):
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
            result["wall_s"] = time.perf_counter() - start
            return result
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
    return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}


def installed(peer):
    import importlib.util

    return importlib.util.find_spec(PEER_MODULES[peer]) is not None


def plan(args):
    """(label, spec) for every measurement, in the order they run."""
    cfg = CONFIGS[args.config]
    base = dict(cfg=cfg, warmup=args.warmup, steps=args.steps)
    rows = []
    if "ours" in args.only:
        rows += [
            (("train", "ours", "fp32"), dict(base, worker="ours/train", precision="fp32")),
            (("train", "ours", "bf16"), dict(base, worker="ours/train", precision="bf16")),
            (
                ("greedy", "ours", "fp32"),
                dict(base, worker="ours/decode", search="greedy", precision="fp32"),
            ),
            (
                ("beam4", "ours", "fp32"),
                dict(base, worker="ours/decode", search="beam4", precision="fp32"),
            ),
        ]
    if "keras_hub" in args.only:
        for precision in ("fp32", "bf16"):
            rows.append(
                (
                    ("train", "keras_hub", precision),
                    dict(base, worker="keras_hub/train", precision=precision),
                )
            )
        rows.append(
            (
                ("greedy", "keras_hub", "fp32"),
                dict(base, worker="keras_hub/decode", precision="fp32"),
            )
        )
    if "torch" in args.only:
        for precision in ("fp32", "bf16"):
            rows.append(
                (
                    ("train", "torch", precision),
                    dict(base, worker="torch/train", precision=precision),
                )
            )
    if "ctranslate2" in args.only:
        for search in ("greedy", "beam4"):
            for precision in ("fp32", "int8"):
                rows.append(
                    (
                        (search, "ctranslate2", precision),
                        dict(base, worker="ctranslate2/decode", search=search, precision=precision),
                    )
                )
    return rows


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per measurement (>= 5)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument(
        "--only", nargs="+", default=["ours", *PEER_MODULES], choices=["ours", *PEER_MODULES]
    )
    parser.add_argument(
        "--memory_calls", type=int, default=1000, help="0 skips the memory-growth check"
    )
    parser.add_argument(
        "--copy_steps", type=int, default=200, help="0 skips the bf16 copy-task check"
    )
    parser.add_argument(
        "--json", default=None, help="where to write the results (default: compare_<config>.json)"
    )
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per measurement")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return run_worker(json.loads(args.worker))
    if args.steps < 5:
        parser.error(f"--steps must be at least 5, got {args.steps}")

    cfg = CONFIGS[args.config]
    skipped = [p for p in PEER_MODULES if p in args.only and not installed(p)]
    for peer in skipped:
        print(f'skipping {peer}: not installed (pip install -e ".[bench]")', flush=True)
    args.only = [x for x in args.only if x not in skipped]

    report = {
        "config": dict(cfg, name=args.config),
        "machine": {
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
        },
        "steps": args.steps,
        "warmup": args.warmup,
        "skipped": skipped,
        "ceilings": {},
        "rows": [],
    }
    started = time.perf_counter()

    def ceilings(when):
        for precision in ("fp32", "bf16"):
            result = run_subprocess(dict(worker="ceiling", precision=precision), args.timeout)
            report["ceilings"][f"{precision}_{when}"] = result
            print(
                f"ceiling {precision} ({when}): {result.get('gflops', float('nan')):.0f} GFLOP/s",
                flush=True,
            )

    ceilings("start")
    for (task, impl, precision), spec in plan(args):
        result = run_subprocess(spec, args.timeout)
        row = {"task": task, "impl": impl, "precision": precision, **result}
        if "times" in result:
            median = statistics.median(result["times"])
            tokens = TRAIN_BATCH * TARGET_LEN if task == "train" else result["tokens"]
            flops = (
                train_flops(cfg)
                if task == "train"
                else decode_flops(cfg, BEAM if task == "beam4" else 1)
            )
            row.update(median_s=median, tokens_per_s=tokens / median, gflops=flops / median / 1e9)
            print(
                f"{task:6} {impl:12} {precision}: {row['tokens_per_s']:10,.0f} tokens/s "
                f"(median {median * 1000:.0f} ms, peak {result['peak_rss_mib']:,.0f} MiB)",
                flush=True,
            )
        else:
            print(f"{task:6} {impl:12} {precision}: {result.get('error')}", flush=True)
        report["rows"].append(row)
    if "ours" in args.only and args.copy_steps:
        copy = {}
        for precision in ("fp32", "bf16"):
            copy[precision] = run_subprocess(
                dict(
                    worker="ours/copy",
                    precision=precision,
                    copy_steps=args.copy_steps,
                    copy_vocab=30,
                    copy_length=8,
                ),
                args.timeout,
            )
        report["bf16_copy_task"] = copy
    if "ours" in args.only and args.memory_calls:
        report["memory"] = run_subprocess(
            dict(worker="ours/memory", cfg=cfg, calls=args.memory_calls), args.timeout
        )
    ceilings("end")
    report["wall_s"] = time.perf_counter() - started

    print()
    print(format_report(report))
    path = args.json or f"compare_{args.config}.json"
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
    print(f"\nwrote {path}")


# ---------------------------------------------------------------------------
# The table.

# The peer each of our rows is compared with, per the performance targets.
TARGETS = {
    ("train", "fp32"): [("keras_hub", "fp32", 1.15), ("torch", "fp32", None)],
    ("train", "bf16"): [("keras_hub", "bf16", 1.3), ("torch", "bf16", None)],
    ("greedy", "fp32"): [
        ("keras_hub", "fp32", 1.2),
        ("ctranslate2", "fp32", None),
        ("ctranslate2", "int8", None),
    ],
    ("beam4", "fp32"): [("ctranslate2", "fp32", 1.0), ("ctranslate2", "int8", None)],
}


def _ceiling(report, precision):
    values = [
        report["ceilings"].get(f"{precision}_{when}", {}).get("gflops") for when in ("start", "end")
    ]
    values = [v for v in values if v]
    return statistics.mean(values) if values else None


def format_report(report):
    cfg = report["config"]
    lines = [
        f"config {cfg['name']}: vocab {cfg['vocab']:,}, d_model {cfg['d_model']}, "
        f"{cfg['layers']}+{cfg['layers']} layers, {cfg['heads']} heads, d_ff {cfg['d_ff']:,}; "
        f"median of {report['steps']} steps after {report['warmup']} warm-up",
    ]
    c = report["ceilings"]
    lines.append(
        "matmul ceiling GFLOP/s, start / end: fp32 "
        + " / ".join(
            f"{c.get(f'fp32_{w}', {}).get('gflops', float('nan')):.0f}" for w in ("start", "end")
        )
        + ", bf16 "
        + " / ".join(
            f"{c.get(f'bf16_{w}', {}).get('gflops', float('nan')):.0f}" for w in ("start", "end")
        )
    )
    lines += [
        "",
        "| task | implementation | precision | tokens/s | % ceiling | peak MiB | ours / this |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows = {(r["task"], r["impl"], r["precision"]): r for r in report["rows"]}
    for (task, impl, precision), row in rows.items():
        if "tokens_per_s" not in row:
            lines.append(
                f"| {task} | {impl} | {precision} | failed: {row.get('error', '')[:120]} | | | |"
            )
            continue
        ceiling = _ceiling(report, "bf16" if precision == "bf16" else "fp32")
        percent = f"{100 * row['gflops'] / ceiling:.0f}%" if ceiling and precision != "int8" else ""
        ratio = ""
        ours = rows.get((task, "ours", "bf16" if precision == "bf16" else "fp32"))
        if impl != "ours" and ours and "tokens_per_s" in ours:
            ratio = f"{ours['tokens_per_s'] / row['tokens_per_s']:.2f}x"
            for peer, peer_precision, target in TARGETS.get((task, ours["precision"]), []):
                if (peer, peer_precision) == (impl, precision) and target:
                    ok = ours["tokens_per_s"] / row["tokens_per_s"] >= target
                    ratio += f" (target {target}x: {'met' if ok else 'missed'})"
        lines.append(
            f"| {task} | {impl} | {precision} | {row['tokens_per_s']:,.0f} | {percent} | "
            f"{row['peak_rss_mib']:,.0f} | {ratio} |"
        )
    copy = report.get("bf16_copy_task")
    if copy and all("final_loss" in copy[p] for p in ("fp32", "bf16")):
        a, b = copy["fp32"]["final_loss"], copy["bf16"]["final_loss"]
        lines.append(
            f"\nbf16 sanity, copy task (loss at step 1: {copy['fp32']['first_loss']:.3f}), "
            f"mean loss of the last 10 of {copy['fp32']['steps']} steps: fp32 {a:.4f}, bf16 {b:.4f} "
            f"({100 * (b - a) / a:+.2f}%; target within 2%)"
        )
    elif copy:
        lines.append(f"\nbf16 sanity failed: {copy}")
    memory = report.get("memory")
    if memory and "growth_mib" in memory:
        lines.append(
            f"memory over {memory['calls']:,} decoding calls: RSS {memory['rss_after_100_mib']:,.1f} MiB "
            f"after 100, {memory['rss_after_all_mib']:,.1f} MiB after all ({memory['growth_mib']:+.1f} MiB)"
        )
    elif memory:
        lines.append(f"memory check failed: {memory}")
    if report["skipped"]:
        lines.append("not installed, skipped: " + ", ".join(report["skipped"]))
    return "\n".join(lines)


if __name__ == "__main__":
    main()

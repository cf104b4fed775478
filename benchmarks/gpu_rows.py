"""The rows of `gpu_training.py`, each run in a process of its own: one
training step of the same model on the same batch, timed.

- `ours`: `Transformer.from_preset(...)` compiled by
  `training.compile_for_training` under the process's `KERAS_BACKEND`
  (JAX: XLA; PyTorch: eager, or `torch.compile` with `jit_compile=True`);
- `torch`: a PyTorch peer of the same model (`comparison.peer_torch`:
  `torch.nn.Transformer`, or layers over `scaled_dot_product_attention`),
  eager or under `torch.compile`, with the options a PyTorch user at their
  best takes (or fewer, for the ablation); compiled, it reports Dynamo's
  graphs, graph breaks and recompiles (as `ours` does on PyTorch).

Neither imports TensorFlow. A spec (a dict) says what to run: `preset`,
`cfg` (vocab, d_model, layers, heads, d_ff), `batch`, `source_len`,
`target_len`, `precision` (`"bf16"` or `"fp32"`), `compiled`, `warmup`
and `steps` (and for `ours`, `fused`: whether the attention may take the
backend's fused kernel, as it does by default). A row returns the seconds
of its first step (tracing and compiling included), of each timed step
(waited for), and of a step among `steps` run in a row (waited for once:
ours by `fit`, as Keras trains; `torch.nn.Transformer` by a plain loop),
its last loss, its device and the attention kernel it ran.
"""

import time

from comparison import peer_torch

DROPOUT, LABEL_SMOOTHING = 0.1, 0.1
PAD, BOS, FIRST_ORDINARY = 0, 2, 4


def batch_arrays(spec, seed=0):
    """`(source, target_in, target_out)` int32 NumPy arrays of random
    ordinary ids, full length (no padding)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    vocab = spec["cfg"]["vocab"]
    source = rng.integers(FIRST_ORDINARY, vocab, (spec["batch"], spec["source_len"]))
    target = rng.integers(FIRST_ORDINARY, vocab, (spec["batch"], spec["target_len"] + 1))
    target[:, 0] = BOS
    return tuple(a.astype("int32") for a in (source, target[:, :-1], target[:, 1:]))


def timed(step, steps_in_a_row, spec):
    """Runs `step()` (which returns the loss as a float, so that the
    device has finished) once for the first step, `warmup` more times,
    then `steps` timed times; then `steps_in_a_row(steps)` (the same
    steps, each dispatched while the last runs, one wait at the end, as
    a training loop runs them) timed as a whole."""
    start = time.perf_counter()
    loss = step()
    first = time.perf_counter() - start
    for _ in range(spec["warmup"]):
        step()
    times = []
    for _ in range(spec["steps"]):
        start = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - start)
    steps_in_a_row(2)  # its own machinery's first use, untimed
    start = time.perf_counter()
    steps_in_a_row(spec["steps"])
    in_a_row = (time.perf_counter() - start) / spec["steps"]
    return {"first_step": first, "times": times, "in_a_row": in_a_row, "loss": loss}


def ours(spec):
    """`Transformer` on the running Keras backend."""
    import keras
    import numpy as np

    import keras_transformer as kt
    from keras_transformer import _backend
    from keras_transformer import training

    if not spec.get("fused", True):  # the layers' own softmax(QKᵀ)V, as before fusing
        _backend.has_fused_attention = lambda dtype: False
    keras.utils.set_random_seed(0)
    if spec["precision"] == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = kt.Transformer.from_preset(
        spec["preset"], vocab_size=spec["cfg"]["vocab"], dropout=DROPOUT
    )
    backend = keras.backend.backend()
    jit_compile = True if backend == "jax" else spec["compiled"]
    settings = training.TrainingSettings(label_smoothing=LABEL_SMOOTHING, jit_compile=jit_compile)
    training.compile_for_training(model, settings)
    source, target_in, target_out = batch_arrays(spec)

    def step():
        logs = model.train_on_batch((source, target_in), target_out, return_dict=True)
        return float(logs["loss"])

    def steps_in_a_row(count):  # `fit`: it waits for the device at the epoch's end
        tiled = [np.tile(a, (count, 1)) for a in (source, target_in, target_out)]
        batch = spec["batch"]
        model.fit(tuple(tiled[:2]), tiled[2], batch_size=batch, shuffle=False, verbose=0)

    result = timed(step, steps_in_a_row, spec)
    result = {
        **result,
        "device": _keras_device(backend),
        "parameters": model.count_params(),
        "attention": _attention_kernel(backend, spec),
    }
    if backend == "torch" and spec["compiled"]:
        result.update(peer_torch.dynamo_counts())
    return result


def _attention_kernel(backend, spec):
    """What ours attends with: `"layers"` (its own softmax(QKᵀ)V),
    `"sdpa"` (PyTorch's fused kernels), or on JAX `"cudnn"` (flash
    attention, where Keras finds it usable for these shapes) or `"xla"`."""
    if not spec.get("fused", True):
        return "layers"
    if backend != "jax":
        return "sdpa"
    import jax.numpy as jnp

    try:  # Keras's private check, read for the diagnosis only
        from keras.src.backend.jax.nn import _can_use_flash_attention
    except ImportError:
        return "unknown"
    heads = spec["cfg"]["heads"]
    dtype = "bfloat16" if spec["precision"] == "bf16" else "float32"
    shape = (spec["batch"], spec["target_len"], heads, spec["cfg"]["d_model"] // heads)
    q = jnp.zeros(shape, dtype)
    return "cudnn" if _can_use_flash_attention(q, q, q, None) else "xla"


def _keras_device(backend):
    if backend == "jax":
        import jax

        return jax.devices()[0].device_kind
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def torch_peer(spec):
    """A PyTorch peer of the same shape (`spec["peer"]`: `"nn"`,
    `torch.nn.Transformer`; `"sdpa"`, layers over
    `scaled_dot_product_attention`), as `spec["options"]` (a
    `peer_torch.PeerOptions` as a list; the best by default) make it, bf16 by
    `torch.autocast`."""
    import torch

    cfg = spec["cfg"]
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    options = peer_torch.PeerOptions(*spec.get("options", peer_torch.BEST))
    if spec.get("peer", "nn") == "sdpa":
        model = peer_torch.sdpa_transformer(cfg, PAD, DROPOUT)
    else:
        model = peer_torch.torch_transformer(cfg, PAD, DROPOUT, options)
    model = model.to(device).train()
    bf16 = spec["precision"] == "bf16"
    compiler = spec["compiler"]
    step, _ = peer_torch.make_step(model, options, spec["compiled"], bf16, device, compiler)
    arrays = batch_arrays(spec)
    padded = bool((arrays[0] == PAD).any())
    batch = tuple(torch.from_numpy(a).long().to(device) for a in arrays)

    def steps_in_a_row(count):
        for _ in range(count):
            loss = step(batch, padded)
        float(loss)

    result = timed(lambda: float(step(batch, padded)), steps_in_a_row, spec)
    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    parameters = sum(p.numel() for p in model.parameters())
    result = {**result, "device": name, "parameters": parameters, "attention": "sdpa"}
    if spec["compiled"]:
        result.update(peer_torch.dynamo_counts())
    return result


ROWS = {"ours": ours, "torch": torch_peer}

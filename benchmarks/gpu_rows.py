"""The rows of `gpu_training.py`, each run in a process of its own: one
training step of the same model on the same batch, timed.

- `ours`: `Transformer.from_preset(...)` compiled by
  `training.compile_for_training` under the process's `KERAS_BACKEND`
  (JAX: XLA; PyTorch: eager, or `torch.compile` with `jit_compile=True`);
- `torch`: `torch.nn.Transformer` of the same shape (tied embedding,
  sinusoids, `cross_entropy(label_smoothing=0.1)`, Adam), eager or under
  `torch.compile`.

Neither imports TensorFlow. A spec (a dict) says what to run: `preset`,
`cfg` (vocab, d_model, layers, heads, d_ff), `batch`, `source_len`,
`target_len`, `precision` (`"bf16"` or `"fp32"`), `compiled`, `warmup`
and `steps`; a row returns the seconds of its first step (tracing and
compiling included) and of each timed step, its last loss, its device.
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


def timed(step, spec):
    """Runs `step()` (which returns the loss as a float, so that the
    device has finished) once for the first step, `warmup` more times,
    then `steps` timed times."""
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
    return {"first_step": first, "times": times, "loss": loss}


def ours(spec):
    """`Transformer` on the running Keras backend."""
    import keras

    import keras_transformer as kt
    from keras_transformer import training

    keras.utils.set_random_seed(0)
    if spec["precision"] == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = kt.Transformer.from_preset(
        spec["preset"], vocab_size=spec["cfg"]["vocab"], dropout=DROPOUT
    )
    backend = keras.backend.backend()
    jit_compile = True if backend == "jax" else spec["compiled"]
    training.compile_for_training(model, label_smoothing=LABEL_SMOOTHING, jit_compile=jit_compile)
    source, target_in, target_out = batch_arrays(spec)

    def step():
        logs = model.train_on_batch((source, target_in), target_out, return_dict=True)
        return float(logs["loss"])

    result = timed(step, spec)
    return {**result, "device": _keras_device(backend), "parameters": model.count_params()}


def _keras_device(backend):
    if backend == "jax":
        import jax

        return jax.devices()[0].device_kind
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def torch_transformer(spec):
    """`torch.nn.Transformer` of the same shape, bf16 by `torch.autocast`."""
    import torch

    cfg = spec["cfg"]
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = peer_torch.torch_transformer(cfg, PAD, DROPOUT).to(device).train()
    forward = torch.compile(model) if spec["compiled"] else model
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    source, target_in, target_out = (
        torch.from_numpy(a).long().to(device) for a in batch_arrays(spec)
    )
    batch = (source, target_in, target_out)
    bf16 = spec["precision"] == "bf16"

    def step():
        return peer_torch.training_step(forward, optimizer, batch, bf16, device)

    result = timed(step, spec)
    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    return {**result, "device": name, "parameters": sum(p.numel() for p in model.parameters())}


ROWS = {"ours": ours, "torch": torch_transformer}

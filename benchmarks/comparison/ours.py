"""The workers for keras_transformer: training, decoding, decoder memory
and the bf16 copy-task check."""

import time

from comparison.measure import quiet_tensorflow
from comparison.measure import rss_mib
from comparison.measure import time_calls
from comparison.workload import BEAM
from comparison.workload import CONFIGS
from comparison.workload import DECODE_SOURCE_LEN
from comparison.workload import DECODE_STEPS
from comparison.workload import DROPOUT
from comparison.workload import LABEL_SMOOTHING
from comparison.workload import decode_sources
from comparison.workload import forced_length
from comparison.workload import train_batch


def build_model(cfg, precision, dropout=DROPOUT):
    """Our `Transformer` of the configuration `cfg`, random weights, under
    the `precision`'s dtype policy."""
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


def _train_step(model):
    """One `train_on_batch` of arrays, returning the loss."""
    import tensorflow as tf

    def step(source, target_in, target_out):
        inputs = (tf.constant(source), tf.constant(target_in))
        return model.train_on_batch(inputs, tf.constant(target_out), return_dict=True)["loss"]

    return step


def worker_train(spec):
    """One training step as `training.train` compiles it."""
    quiet_tensorflow()
    from keras_transformer.training import TrainingSettings
    from keras_transformer.training import compile_for_training

    model = build_model(spec["cfg"], spec["precision"])
    compile_for_training(model, TrainingSettings(label_smoothing=LABEL_SMOOTHING))
    step = _train_step(model)
    batch = train_batch(spec["cfg"], spec["ids"])
    losses = []
    times = time_calls(lambda: losses.append(float(step(*batch))), spec["warmup"], spec["steps"])
    return {"times": times, "loss": losses[-1]}


def searcher(model, beam, steps, ids, jit):
    """A `tf.function` from sources to exactly `steps` generated tokens."""
    import tensorflow as tf

    from keras_transformer.decoding import beam_search
    from keras_transformer.decoding import greedy_search

    def last_logits(token_ids, cache, index):
        logits, cache = model.decode_step(token_ids, cache, index)
        return logits[:, -1], cache

    step = forced_length(last_logits, steps, ids["eos"])

    @tf.function(jit_compile=jit, input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def run(source):
        batch = tf.shape(source)[0]
        mask = tf.not_equal(source, ids["pad"])
        # Empty: the search grows it as `Translator` does.
        cache = model.init_cache(model.encode(source), mask, max_length=0)
        grow = dict(resize_cache=model.resize_cache)
        if beam == 1:
            output, _ = greedy_search(step, cache, batch, steps, **grow)
        else:
            output, _ = beam_search(step, cache, batch, steps, beam_size=beam, **grow)
        return output

    return run


def worker_decode(spec):
    """Greedy or beam decoding under XLA of `spec["decode"]` (a
    `DECODE_SHAPES` entry), exactly its `steps` tokens each."""
    quiet_tensorflow()
    import numpy as np
    import tensorflow as tf

    cfg, ids = spec["cfg"], spec["ids"]
    model = build_model(cfg, spec["precision"], dropout=0.0)
    shape = spec["decode"]
    run = searcher(model, shape["beam"], shape["steps"], ids, jit=True)
    source = tf.constant(decode_sources(cfg, ids, (shape["batch"], shape["source_len"])))
    shapes = []
    step = lambda: shapes.append(run(source).numpy().shape)  # noqa: E731
    times = time_calls(step, spec["warmup"], spec["steps"])
    lengths = np.sum(run(source).numpy() != ids["pad"], axis=-1)
    return {"times": times, "tokens": int(lengths.sum()), "out_shape": list(shapes[-1])}


def worker_memory(spec):
    """RSS after `calls` decoding calls (greedy and beam alternating, new
    random sources each call) against RSS after the first 100."""
    quiet_tensorflow()
    import numpy as np
    import tensorflow as tf

    cfg, calls, ids = spec["cfg"], spec["calls"], spec["ids"]
    model = build_model(cfg, "fp32", dropout=0.0)
    runs = [searcher(model, beam, 8, ids, jit=True) for beam in (1, BEAM)]
    rng = np.random.default_rng(0)
    rss = {}
    start = time.perf_counter()
    for call in range(1, calls + 1):
        source = rng.integers(ids["first"], cfg["vocab"], (4, DECODE_SOURCE_LEN), dtype=np.int32)
        runs[call % 2](tf.constant(source)).numpy()
        if call in (100, calls):
            rss[call] = rss_mib()
    return {
        "calls": calls,
        "rss_after_100_mib": rss[100],
        "rss_after_all_mib": rss[calls],
        "growth_mib": rss[calls] - rss[100],
        "seconds": time.perf_counter() - start,
    }


def worker_copy(spec):
    """The tiny config without dropout on a copy task (vocabulary
    `copy_vocab`, `copy_length` tokens), Adam at 1e-3 after a 20-step
    linear warm-up, the same data and initial weights in both precisions.
    Returns the mean loss of the last 10 of `copy_steps` steps; one run
    resolves a few percent (`benchmarks/README.md`)."""
    quiet_tensorflow()
    import keras
    import numpy as np

    from keras_transformer.training import TrainingSettings
    from keras_transformer.training import compile_for_training

    keras.utils.set_random_seed(0)
    cfg, ids = dict(CONFIGS["tiny"], vocab=spec["copy_vocab"]), spec["ids"]
    model = build_model(cfg, spec["precision"], dropout=0.0)
    warmup, rate = 20, 1e-3
    schedule = keras.optimizers.schedules.PolynomialDecay(rate / warmup, warmup, rate, power=1.0)
    optimizer = keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    compile_for_training(model, TrainingSettings(label_smoothing=LABEL_SMOOTHING), optimizer)
    step = _train_step(model)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(spec["copy_steps"]):
        shape = (64, spec["copy_length"])
        source = rng.integers(ids["first"], spec["copy_vocab"], shape, dtype=np.int32)
        target = np.concatenate([np.full((64, 1), ids["bos"], np.int32), source], axis=1)
        losses.append(float(step(source, target[:, :-1], target[:, 1:])))
    return {
        "final_loss": float(np.mean(losses[-10:])),
        "first_loss": losses[0],
        "steps": len(losses),
    }

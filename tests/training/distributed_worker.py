"""Runs a few training steps under a strategy and saves the result.

Used by `test_distribute.py` in fresh processes, because logical devices
and `TF_CONFIG` must be set before TensorFlow starts.

    python distributed_worker.py mirrored OUT.npz    # 2 logical CPUs
    python distributed_worker.py one_device OUT.npz
    TF_CONFIG=... python distributed_worker.py multiworker OUT.npz
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

mode, out_path = sys.argv[1], sys.argv[2]
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 1
if mode == "mirrored":
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402

from keras_transformer import Transformer  # noqa: E402
from keras_transformer import Translator  # noqa: E402
from keras_transformer import training  # noqa: E402
from keras_transformer_runtime import Runner  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tests.training.helpers import NumberTokenizer  # noqa: E402
from tests.training.helpers import train_quietly  # noqa: E402

if mode == "mirrored":
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
elif mode == "multiworker":
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
else:
    strategy = tf.distribute.get_strategy()

# The same global batches for every mode: 8 pairs of uneven length, so the
# replicas hold different numbers of real tokens.
rng = np.random.default_rng(0)
source = rng.integers(4, 40, size=(8, 9)).astype("int32")
target = rng.integers(4, 40, size=(8, 7)).astype("int32")
for i in range(8):
    source[i, 3 + i % 6 :] = 0
    target[i, 2 + (i * 5) % 5 :] = 0
target_in = np.concatenate([np.full((8, 1), 2, "int32"), target[:, :-1]], 1)
target_in[target_in == 0] = 0

keras.utils.set_random_seed(7)
with strategy.scope():
    model = Transformer.from_preset("tiny", vocab_size=40, dropout=0.0)


def dataset_fn(input_context):
    dataset = tf.data.Dataset.from_tensor_slices(((source, target_in), target)).repeat()
    per_replica = input_context.get_per_replica_batch_size(8)
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return dataset.batch(per_replica)


class CountingTranslator(Runner):
    """A `Translator` that counts its calls."""

    def __init__(self, translator):
        self.translator, self.model, self.calls = translator, translator.model, 0

    def translate(self, sentences, batch_size=64, progress=None):
        self.calls += 1
        return self.translator.translate(sentences, batch_size)


translator = CountingTranslator(
    Translator(model, NumberTokenizer(), beam_size=1, max_extra_length=3)
)
evaluator = training.TranslationEvaluator(
    translator, ["5 6 7", "8 9 10 11"], ["7 6 5", "11 10 9 8"], verbose=0
)
start = time.perf_counter()
if mode == "multiworker":
    model_dir = os.path.join(os.path.dirname(out_path), "run")  # shared by the workers
    result = train_quietly(
        model_dir,
        steps,
        model,
        dataset_fn,
        steps_per_checkpoint=1,
        warmup_steps=10,
        evaluator=evaluator,
        best_monitor="val_bleu",
        keep_best=5,
        patience=steps,
    )
    losses = result.history["loss"]
else:
    data = tf.data.Dataset.from_tensor_slices(((source, target_in), target)).batch(8).repeat()
    with strategy.scope():
        # SGD, so that a weight difference is exactly lr x the gradient
        # difference (Adam's first step, lr * g / |g|, would turn float
        # noise in near-zero gradients into full-size steps).
        model.compile(
            optimizer=keras.optimizers.SGD(0.5),
            loss=training.LabelSmoothedCrossEntropy(0.1),
        )
    history = model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=[evaluator])
    losses = history.history["loss"]
seconds = time.perf_counter() - start
np.savez(
    out_path,
    loss=np.array(losses),
    seconds=seconds,
    tokens=float((target != 0).sum() * steps),
    translate_calls=translator.calls,
    val_bleu=np.array([e["val_bleu"] for e in evaluator.history]),
    **{f"w{i}": w for i, w in enumerate(model.get_weights())},
)
print(json.dumps({"mode": mode, "loss": [float(x) for x in losses], "seconds": seconds}))

"""A training run for the kill-and-resume test.

    python resume_worker.py MODEL_DIR TRAIN_STEPS STEPS_PER_CHECKPOINT

Appends every finished step to MODEL_DIR/steps.log (flushed at once), and
writes MODEL_DIR/result.json when training ends.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tests.micro import micro_model  # noqa: E402
from tests.training.helpers import reversal_batches  # noqa: E402
from tests.training.helpers import train_quietly  # noqa: E402

model_dir, train_steps, interval = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(model_dir, exist_ok=True)


class LogSteps(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        with open(os.path.join(model_dir, "steps.log"), "a") as f:
            f.write(f"{int(self.model.optimizer.iterations.numpy())}\n")
            f.flush()
            os.fsync(f.fileno())


# Unseeded: a resumed run draws a fresh order, as real runs do.
batches = reversal_batches(2000, seed=None, batch_tokens=512)
result = train_quietly(
    model_dir,
    train_steps,
    micro_model(dropout=0.1),
    batches,
    steps_per_checkpoint=interval,
    warmup_steps=50,
    callbacks=[LogSteps()],
)
with open(os.path.join(model_dir, "result.json"), "w") as f:
    json.dump({"initial_step": result.initial_step, "final_step": result.final_step}, f)

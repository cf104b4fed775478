"""What a run keeps beside its checkpoints, and what it refuses to mix."""

import json
import os
import warnings

import keras
import numpy as np
import pytest

from keras_transformer import training
from keras_transformer.training.checkpoints import write_json_atomically
from tests.micro import micro_model
from tests.training.helpers import Numbers
from tests.training.helpers import reversal_batches
from tests.training.helpers import train_quietly

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design


def test_resume_into_another_architecture_is_refused(tmp_path):
    # Four heads and two heads of the same width have weights of the same
    # shapes: restored by position, one would silently load the other.
    train_quietly(tmp_path, 2, micro_model(num_heads=4), steps_per_checkpoint=2)
    with pytest.raises(training.IncompatibleRunError, match="num_heads: 4 stored, 2 now"):
        train_quietly(tmp_path, 4, micro_model(num_heads=2), steps_per_checkpoint=2)
    paths = training.checkpoint_paths(tmp_path)
    with pytest.raises(training.IncompatibleRunError, match="num_heads: 4 stored, 2 now"):
        training.average_checkpoints(micro_model(num_heads=2), paths)
    # Dropout is no part of the architecture: a resume may change it.
    result = train_quietly(
        tmp_path, 4, micro_model(num_heads=4, dropout=0.3), steps_per_checkpoint=2
    )
    assert (result.initial_step, result.final_step) == (2, 4)


def test_a_run_recorded_before_a_setting_existed_has_its_default(tmp_path):
    # A run recorded by an older version lacks the settings added since
    # (activation, output_bias, scale_embeddings): it was trained with what
    # their defaults compute, and must still resume and average.
    train_quietly(tmp_path, 2, micro_model(), steps_per_checkpoint=2)
    path = os.path.join(tmp_path, "checkpoints", "run.json")
    with open(path) as f:
        run = json.load(f)
    for key in ("activation", "output_bias", "scale_embeddings"):
        del run["model"][key]
    with open(path, "w") as f:
        json.dump(run, f)
    paths = training.checkpoint_paths(tmp_path)
    training.average_checkpoints(micro_model(), paths)
    assert train_quietly(tmp_path, 4, micro_model(), steps_per_checkpoint=2).final_step == 4
    # A model that differs from those defaults is still refused.
    with pytest.raises(training.IncompatibleRunError, match="activation: 'relu' stored, 'gelu'"):
        training.average_checkpoints(micro_model(activation="gelu"), paths)
    with pytest.raises(training.IncompatibleRunError, match="output_bias: False stored, True"):
        train_quietly(tmp_path, 6, micro_model(output_bias=True), steps_per_checkpoint=2)


def test_resume_with_other_accumulation_or_tokenizer_is_refused(tmp_path):
    class Tokenizer(Numbers):
        fingerprint = "aaaa"

    def batches():  # your own pipeline, with its tokenizer
        return training.TokenBatches(reversal_batches().dataset, tokenizer=Tokenizer())

    train_quietly(tmp_path, 2, batches=batches(), steps_per_checkpoint=2, accumulation_steps=2)
    with pytest.raises(training.IncompatibleRunError, match="accumulation_steps: 2 stored, 1 now"):
        train_quietly(tmp_path, 4, batches=batches(), steps_per_checkpoint=2)
    Tokenizer.fingerprint = "bbbb"
    with pytest.raises(training.IncompatibleRunError, match="tokenizer_fingerprint: 'aaaa'"):
        train_quietly(tmp_path, 4, batches=batches(), steps_per_checkpoint=2, accumulation_steps=2)


def test_the_settings_are_recorded_and_what_trains_may_not_change(tmp_path):
    train_quietly(tmp_path, 2, steps_per_checkpoint=2, warmup_steps=7, freeze="encoder")
    with open(tmp_path / "checkpoints" / "run.json") as f:
        recorded = json.load(f)["settings"]
    assert (recorded["warmup_steps"], recorded["freeze"], recorded["train_steps"]) == (
        7,
        ["encoder"],
        2,
    )
    # Other parts frozen: the optimizer's slots would restore by position
    # into other weights.
    with pytest.raises(
        training.IncompatibleRunError, match=r"freeze: \['encoder'\] stored, \[\] now"
    ):
        train_quietly(tmp_path, 4, steps_per_checkpoint=2, warmup_steps=7)
    # Anything else may change (more updates, another warm-up), recorded anew.
    result = train_quietly(tmp_path, 4, steps_per_checkpoint=2, warmup_steps=9, freeze="encoder")
    assert (result.initial_step, result.final_step) == (2, 4)
    with open(tmp_path / "checkpoints" / "run.json") as f:
        recorded = json.load(f)["settings"]
    assert (recorded["warmup_steps"], recorded["train_steps"]) == (9, 4)


def truncate(path):
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def test_an_unreadable_newest_checkpoint_is_skipped_with_a_warning(tmp_path):
    train_quietly(tmp_path, 6, steps_per_checkpoint=2)
    directory = tmp_path / "checkpoints"
    truncate(next(directory.glob("ckpt-6.data-*")))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = train_quietly(tmp_path, 8, steps_per_checkpoint=2)
    skipped = [w for w in caught if w.category is RuntimeWarning and "ckpt-6" in str(w.message)]
    assert len(skipped) == 1, [str(w.message) for w in caught]
    assert (result.initial_step, result.final_step) == (4, 8)  # not from 0


def test_a_missing_state_file_still_resumes_and_nothing_readable_is_refused(tmp_path):
    train_quietly(tmp_path, 4, steps_per_checkpoint=2)
    os.remove(tmp_path / "checkpoints" / "checkpoint")  # a partial copy of the run
    assert train_quietly(tmp_path, 6, steps_per_checkpoint=2).initial_step == 4
    for data in (tmp_path / "checkpoints").glob("ckpt-*.data-*"):
        truncate(data)
    with pytest.raises(training.IncompatibleRunError, match="No checkpoint .* can be read"):
        train_quietly(tmp_path, 8, steps_per_checkpoint=2)


def test_non_finite_weights_are_never_saved_or_averaged(tmp_path):
    class PoisonAfterUpdate(keras.callbacks.Callback):
        """NaN weights from the last update of the second interval, which
        the loss of that update (computed before it) does not show."""

        def on_train_batch_end(self, batch, logs=None):
            if int(self.model.optimizer.iterations.numpy()) == 4:
                weight = self.model.trainable_weights[0]
                weight.assign(np.full(weight.shape, np.nan, "float32"))

    with pytest.raises(training.TrainingDivergedError, match="step 4.*ckpt-2"):
        train_quietly(tmp_path, 10, steps_per_checkpoint=2, callbacks=[PoisonAfterUpdate()])
    paths = training.checkpoint_paths(tmp_path)
    assert [os.path.basename(p) for p in paths] == ["ckpt-2"]
    # A checkpoint written with NaN weights by other means is not averaged.
    model = micro_model()
    training.average_checkpoints(model, paths)
    model.trainable_weights[0].assign(np.full(model.trainable_weights[0].shape, np.inf))
    bad = training.checkpoints.training_checkpoint(model).save(str(tmp_path / "bad" / "ckpt"))
    with pytest.raises(ValueError, match="NaN or infinite"):
        training.average_checkpoints(micro_model(), [bad])


def test_marker_files_are_replaced_whole(tmp_path):
    """A run's JSON files (`write_json_atomically`): a write that fails half
    way leaves the old file, and no stray temporary file."""
    path = tmp_path / "training_done.json"
    write_json_atomically(str(path), {"final_step": 30})
    with pytest.raises(TypeError):  # fails half way through writing
        write_json_atomically(str(path), {"final_step": 40, "seconds": object()})
    assert json.loads(path.read_text()) == {"final_step": 30}
    assert os.listdir(tmp_path) == ["training_done.json"]

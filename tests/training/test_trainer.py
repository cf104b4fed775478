import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import training
from keras_transformer.training.devices import cpu_has_native_bf16
from tests.micro import micro_model
from tests.training.helpers import letter_reversal_corpus
from tests.training.helpers import number_tokenizer
from tests.training.helpers import reversal_batches
from tests.training.helpers import train_quietly

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design


@pytest.mark.large  # trains to a result
def test_learns_to_reverse_sequences(letter_reverser):
    """The recipe (schedule, smoothed loss, token batches) learns a task:
    1,000 updates of the tiny model reverse held-out letter sequences."""
    assert letter_reverser.result.final_step == 1000
    sources, targets = letter_reversal_corpus(500, seed=1)
    held_out = training.make_batches(
        training.text_pairs_from_lists(sources, targets),
        letter_reverser.tokenizer,
        batch_tokens=1024,
        max_length=16,
        shuffle=False,
    )
    metrics = letter_reverser.model.evaluate(held_out.dataset, verbose=0, return_dict=True)
    assert metrics["accuracy"] >= 0.95, metrics


def test_resumes_and_skips_a_finished_run(tmp_path):
    first = train_quietly(tmp_path, 4, steps_per_checkpoint=2)
    assert (first.initial_step, first.final_step) == (0, 4)
    second = train_quietly(tmp_path, 6, steps_per_checkpoint=2)
    assert (second.initial_step, second.final_step) == (4, 6)
    names = [os.path.basename(p) for p in training.checkpoint_paths(tmp_path)]
    assert names == ["ckpt-2", "ckpt-4", "ckpt-6"]
    third = train_quietly(tmp_path, 6, steps_per_checkpoint=2)
    assert (third.initial_step, third.final_step, third.history) == (6, 6, {})


def test_resumed_weights_equal_the_checkpoint(tmp_path):
    model, restored = micro_model(), micro_model()
    train_quietly(tmp_path, 3, model, steps_per_checkpoint=3)
    result = train_quietly(tmp_path, 3, restored)
    assert result.initial_step == 3
    for a, b in zip(model.get_weights(), restored.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    assert int(restored.optimizer.iterations) == 3


def test_nan_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    class Poison(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if int(self.model.optimizer.iterations) == 5:
                weight = self.model.trainable_weights[0]
                weight.assign(np.full(weight.shape, np.nan, "float32"))

    with pytest.raises(training.TrainingDivergedError, match="step 6.*ckpt-4"):
        train_quietly(tmp_path, 10, steps_per_checkpoint=2, callbacks=[Poison()])
    paths = training.checkpoint_paths(tmp_path)
    assert os.path.basename(paths[-1]) == "ckpt-4"
    good = training.average_checkpoints(micro_model(), paths[-1:])
    assert all(np.isfinite(w).all() for w in good.get_weights())


def test_average_checkpoints_is_the_mean(tmp_path):
    train_quietly(tmp_path, 6, steps_per_checkpoint=2)
    paths = training.checkpoint_paths(tmp_path)[-2:]
    singles = [training.average_checkpoints(micro_model(), [p]).get_weights() for p in paths]
    averaged = training.average_checkpoints(micro_model(), paths).get_weights()
    for a, b, mean in zip(*singles, averaged, strict=True):
        np.testing.assert_allclose(mean, (a + b) / 2, rtol=1e-6, atol=1e-7)
    assert not np.allclose(singles[0][0], singles[1][0])
    with pytest.raises(ValueError, match="paths"):
        training.average_checkpoints(micro_model(), [])


def test_accumulation_counts_updates(tmp_path):
    model = micro_model()
    result = train_quietly(tmp_path, 3, model, steps_per_checkpoint=3, accumulation_steps=2)
    assert result.final_step == 3
    assert int(model.optimizer._iterations) == 6  # micro-batches
    assert result.history["tokens_per_sec"][-1] > 0
    d_model, default_warmup = 16, 4000
    expected_rate = float(training.TransformerSchedule(d_model, default_warmup)(3))
    assert result.history["learning_rate"][-1] == pytest.approx(expected_rate)


def test_tensorboard_logs_and_float16_loss_scaling(tmp_path):
    result = train_quietly(tmp_path, 2, steps_per_checkpoint=2, tensorboard=True)
    assert np.isfinite(result.history["loss"][-1])
    assert os.listdir(os.path.join(tmp_path, "logs", "train"))
    fp16 = micro_model(dtype=training.dtype_policy("fp16"))
    train_quietly(tmp_path / "fp16", 1, fp16)
    assert isinstance(fp16.optimizer, keras.optimizers.LossScaleOptimizer)


@pytest.mark.skipif(
    not (cpu_has_native_bf16() or tf.config.list_physical_devices("GPU")),
    reason="bfloat16 needs a GPU or a CPU with native bfloat16 (AMX or AVX512-BF16); "
    "this CPU would emulate it, and `dtype_policy('bf16')` warns so",
)
def test_trains_in_bfloat16(tmp_path):
    model = micro_model(dtype=training.dtype_policy("bf16"))
    result = train_quietly(tmp_path, 2, model, steps_per_checkpoint=2)
    assert np.isfinite(result.history["loss"][-1])
    assert model.compute_dtype == "bfloat16" and model.variable_dtype == "float32"


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: training.dtype_policy("fp8"), "mixed_precision"),
        (lambda: training.get_strategy("tpu"), "strategy"),
        (lambda: train_quietly("/tmp/x", 0), "train_steps"),
    ],
)
def test_bad_arguments(call, name):
    with pytest.raises(ValueError, match=f"Received: {name}="):
        call()


def test_time_budget_stops_and_checkpoints(tmp_path):
    result = train_quietly(
        tmp_path, 100_000, steps_per_checkpoint=1000, budget=training.TimeBudget(1)
    )
    assert result.out_of_time and 0 < result.final_step < 100_000
    assert os.path.basename(result.checkpoint) == f"ckpt-{result.final_step}"


def test_recommended_jit_compile_is_xla_on_gpus_only(monkeypatch):
    from keras_transformer import _backend
    from keras_transformer.training import recommended_jit_compile

    monkeypatch.setattr(_backend, "gpu_compute_capabilities", lambda: [])
    assert recommended_jit_compile() is False
    monkeypatch.setattr(_backend, "gpu_compute_capabilities", lambda: [(9, 0)])
    assert recommended_jit_compile() is True


def test_compile_for_training_honours_the_models_pad_id():
    pad = 7
    model = micro_model(pad_id=pad)
    assert training.compile_for_training(model) is model
    rng = np.random.default_rng(0)
    source = rng.integers(8, 20, (4, 6))
    target_out = rng.integers(8, 20, (4, 5))
    target_out[:, 3:] = pad  # two pad positions per row: not counted
    target_in = np.concatenate([np.full((4, 1), 2), target_out[:, :-1]], axis=1)
    logits = model((source, target_in)).numpy()
    real = target_out != pad
    metrics = model.evaluate((source, target_in), target_out, verbose=0, return_dict=True)
    assert metrics["tokens"] == real.sum() == 12
    hits = (logits.argmax(-1) == target_out) & real
    assert metrics["accuracy"] == pytest.approx(hits.sum() / real.sum())
    loss = training.LabelSmoothedCrossEntropy(0.1, pad_id=pad)(target_out, logits)
    assert metrics["loss"] == pytest.approx(float(loss), rel=1e-5)
    assert isinstance(model.optimizer.learning_rate.numpy().item(), float)
    with pytest.raises(ValueError, match="Received: jit_compile='yes'"):
        training.TrainingSettings(jit_compile="yes")


def test_no_training_data_is_an_error_that_says_why(tmp_path):
    # Every pair is longer than max_length: nothing to train on.
    # Repeated passes over no pairs are no batches too, not an endless wait.
    for repeat in (False, True):
        long_pairs = reversal_batches(50, max_length=3, repeat=repeat)
        with pytest.raises(training.NoTrainingDataError, match="50 pairs read, 0 kept.*50 dropped"):
            train_quietly(tmp_path / "long", 4, batches=long_pairs, steps_per_checkpoint=2)
    # No checkpoint of untrained weights was left behind.
    assert training.checkpoint_paths(tmp_path / "long") == []


def test_empty_training_files_are_an_error_that_says_so(tmp_path):
    (tmp_path / "empty.src").write_text("")
    (tmp_path / "empty.tgt").write_text("")
    pairs = training.text_pairs_from_files(tmp_path / "empty.src", tmp_path / "empty.tgt")
    for repeat in (False, True):
        empty = training.make_batches(
            pairs, number_tokenizer, batch_tokens=64, max_length=16, repeat=repeat
        )
        with pytest.raises(training.NoTrainingDataError, match="0 pairs read"):
            train_quietly(tmp_path / "empty", 4, batches=empty, steps_per_checkpoint=2)
    assert training.checkpoint_paths(tmp_path / "empty") == []


class TrainedWeights(keras.callbacks.Callback):
    """The trainable weights after each update, by update count."""

    def __init__(self):
        super().__init__()
        self.weights = {}

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations)
        self.weights[step] = [w.numpy() for w in self.model.trainable_weights]


def test_moving_averages_are_evaluated_kept_as_best_and_left_in_the_model(tmp_path):
    momentum, model, trained = 0.8, micro_model(), TrainedWeights()
    result = train_quietly(
        tmp_path,
        6,
        model,
        steps_per_checkpoint=2,
        warmup_steps=4,
        ema_momentum=momentum,
        callbacks=[trained],
        validation_data=reversal_batches(20, seed=1),
        validation_steps=1,
        best_monitor="val_loss",
        keep_best=1,
    )
    # The NumPy reference: the average starts at the first update's weights.
    averages = {1: trained.weights[1]}
    for step in range(2, 7):
        averages[step] = [
            momentum * a + (1 - momentum) * w
            for a, w in zip(averages[step - 1], trained.weights[step], strict=True)
        ]
    for actual, expected in zip(model.trainable_weights, averages[6], strict=True):
        np.testing.assert_allclose(actual.numpy(), expected, rtol=1e-5, atol=1e-6)
    # Checkpoints hold the trained weights (to resume) and the averages (to
    # average and export); the best one holds the averages it was scored on.
    checkpoint = training.checkpoint_paths(tmp_path)[-1]
    restored = micro_model()
    training.checkpoints.training_checkpoint(restored).restore(checkpoint).expect_partial()
    for actual, expected in zip(restored.trainable_weights, trained.weights[6], strict=True):
        np.testing.assert_array_equal(actual.numpy(), expected)
    averaged = training.average_checkpoints(micro_model(), [checkpoint])
    best = training.average_checkpoints(micro_model(), [result.best_checkpoint])
    best_step = int(result.best_checkpoint.rsplit("-", 1)[1])
    for weights, step in ((averaged, 6), (best, best_step)):
        for actual, expected in zip(weights.trainable_weights, averages[step], strict=True):
            np.testing.assert_allclose(actual.numpy(), expected, rtol=1e-5, atol=1e-6)
    # Turning the averages on or off in a run is refused.
    with pytest.raises(training.IncompatibleRunError, match="moving_averages"):
        train_quietly(tmp_path, 8, steps_per_checkpoint=2, warmup_steps=4)

import os

import keras
import numpy as np
import pytest

from keras_transformer import Transformer
from keras_transformer import training
from tests.training.helpers import number_tokenizer
from tests.training.helpers import reversal_corpus


def batches(n=4000, seed=0, **kwargs):
    sources, targets = reversal_corpus(n, seed=seed)
    pairs = training.text_pairs_from_lists(sources, targets)
    options = dict(batch_tokens=1024, max_length=16, seed=seed, vocab_size=20)
    options.update(kwargs)
    return training.make_batches(pairs, number_tokenizer, **options)


def tiny(**overrides):
    return Transformer.from_preset("tiny", **{"vocab_size": 20, "dropout": 0.0, **overrides})


def test_learns_to_reverse_sequences(tmp_path):
    """The recipe (schedule, smoothed loss, token batches) learns a task."""
    model = tiny()
    result = training.train(
        model,
        batches(),
        str(tmp_path),
        train_steps=800,
        steps_per_checkpoint=400,
        warmup_steps=200,
        tensorboard=False,
        verbose=0,
    )
    assert result.final_step == 800
    held_out = model.evaluate(batches(500, seed=1, shuffle=False), verbose=0, return_dict=True)
    assert held_out["accuracy"] >= 0.95, held_out


def test_resumes_and_skips_a_finished_run(tmp_path):
    model_dir = str(tmp_path)
    first = training.train(
        tiny(),
        batches(200),
        model_dir,
        train_steps=4,
        steps_per_checkpoint=2,
        tensorboard=False,
        verbose=0,
    )
    assert (first.initial_step, first.final_step) == (0, 4)
    second = training.train(
        tiny(),
        batches(200),
        model_dir,
        train_steps=6,
        steps_per_checkpoint=2,
        tensorboard=False,
        verbose=0,
    )
    assert (second.initial_step, second.final_step) == (4, 6)
    assert [os.path.basename(p) for p in training.checkpoint_paths(model_dir)] == [
        "ckpt-2",
        "ckpt-4",
        "ckpt-6",
    ]
    third = training.train(
        tiny(),
        batches(200),
        model_dir,
        train_steps=6,
        steps_per_checkpoint=2,
        tensorboard=False,
        verbose=0,
    )
    assert (third.initial_step, third.final_step, third.history) == (6, 6, {})


def test_resumed_weights_equal_the_checkpoint(tmp_path):
    model = tiny()
    training.train(
        model,
        batches(200),
        str(tmp_path),
        train_steps=3,
        steps_per_checkpoint=3,
        tensorboard=False,
        verbose=0,
    )
    restored = tiny()
    result = training.train(
        restored, batches(200), str(tmp_path), train_steps=3, tensorboard=False, verbose=0
    )
    assert result.initial_step == 3
    for a, b in zip(model.get_weights(), restored.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert int(restored.optimizer.iterations) == 3


def test_nan_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    class Poison(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if int(self.model.optimizer.iterations) == 5:
                weight = self.model.trainable_weights[0]
                weight.assign(np.full(weight.shape, np.nan, "float32"))

    model = tiny()
    with pytest.raises(training.TrainingDivergedError, match="step 6.*ckpt-4"):
        training.train(
            model,
            batches(200),
            str(tmp_path),
            train_steps=10,
            steps_per_checkpoint=2,
            callbacks=[Poison()],
            tensorboard=False,
            verbose=0,
        )
    paths = training.checkpoint_paths(str(tmp_path))
    assert os.path.basename(paths[-1]) == "ckpt-4"
    good = training.average_checkpoints(tiny(), paths[-1:])
    assert all(np.isfinite(w).all() for w in good.get_weights())


def test_average_checkpoints_is_the_mean(tmp_path):
    model = tiny()
    training.train(
        model,
        batches(200),
        str(tmp_path),
        train_steps=6,
        steps_per_checkpoint=2,
        tensorboard=False,
        verbose=0,
    )
    paths = training.checkpoint_paths(str(tmp_path))[-2:]
    singles = [training.average_checkpoints(tiny(), [p]).get_weights() for p in paths]
    averaged = training.average_checkpoints(tiny(), paths).get_weights()
    for a, b, mean in zip(*singles, averaged):
        np.testing.assert_allclose(mean, (a + b) / 2, rtol=1e-6, atol=1e-7)
    assert not np.allclose(singles[0][0], singles[1][0])
    with pytest.raises(ValueError, match="paths"):
        training.average_checkpoints(tiny(), [])


def test_accumulation_counts_updates(tmp_path):
    model = tiny()
    result = training.train(
        model,
        batches(200),
        str(tmp_path),
        train_steps=3,
        steps_per_checkpoint=3,
        accumulation_steps=2,
        tensorboard=False,
        verbose=0,
    )
    assert result.final_step == 3
    assert int(model.optimizer._iterations) == 6  # micro-batches
    assert result.history["tokens_per_sec"][-1] > 0
    assert result.history["learning_rate"][-1] == pytest.approx(
        float(training.TransformerSchedule(64, 4000)(3))
    )


def test_tensorboard_logs_and_mixed_precision(tmp_path):
    model = tiny(dtype=training.dtype_policy("bf16"))
    result = training.train(
        model, batches(200), str(tmp_path), train_steps=2, steps_per_checkpoint=2, verbose=0
    )
    assert np.isfinite(result.history["loss"][-1])
    assert os.listdir(os.path.join(tmp_path, "logs", "train"))
    fp16 = tiny(dtype=training.dtype_policy("fp16"))
    training.train(
        fp16, batches(200), str(tmp_path / "fp16"), train_steps=1, tensorboard=False, verbose=0
    )
    assert isinstance(fp16.optimizer, keras.optimizers.LossScaleOptimizer)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: training.dtype_policy("fp8"), "mixed_precision"),
        (lambda: training.get_strategy("tpu"), "strategy"),
        (lambda: training.train(tiny(), batches(10), "/tmp/x", train_steps=0), "train_steps"),
    ],
)
def test_bad_arguments(call, name):
    with pytest.raises(ValueError, match=f"Received: {name}="):
        call()


def test_time_budget_stops_and_checkpoints(tmp_path):
    result = training.train(
        tiny(),
        batches(400),
        str(tmp_path),
        train_steps=100_000,
        steps_per_checkpoint=1000,
        max_seconds=3,
        tensorboard=False,
        verbose=0,
    )
    assert result.out_of_time and 0 < result.final_step < 100_000
    assert os.path.basename(result.checkpoint) == f"ckpt-{result.final_step}"


def test_recommended_jit_compile_is_xla_on_gpus_only(monkeypatch):
    import tensorflow as tf

    from keras_transformer.training import recommended_jit_compile

    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [])
    assert recommended_jit_compile() is False
    monkeypatch.setattr(
        tf.config, "list_physical_devices", lambda kind=None: ["GPU:0"] if kind == "GPU" else []
    )
    assert recommended_jit_compile() is True


def test_compile_for_training_honours_the_models_pad_id():
    pad = 7
    model = tiny(pad_id=pad)
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
        training.compile_for_training(tiny(), jit_compile="yes")

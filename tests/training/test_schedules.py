import os

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer.training import TransformerSchedule
from keras_transformer.training import paper_optimizer
from tests.micro import micro_model


def formula(step, d_model=512, warmup=4000, scale=1.0):
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@pytest.mark.parametrize("step", [1, 100, 4000, 10000])
def test_equals_formula(step):
    schedule = TransformerSchedule()
    np.testing.assert_allclose(float(schedule(step)), formula(step), rtol=1e-6)


def test_known_values_and_peak_at_warmup():
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    # Hand-computed: 512^-0.5 * 4000^-0.5 = 1 / sqrt(2,048,000).
    np.testing.assert_allclose(float(schedule(4000)), 6.98771e-4, rtol=1e-5)
    steps = np.arange(1, 20001)
    rates = ops.convert_to_numpy(schedule(steps))
    assert steps[np.argmax(rates)] == 4000


def test_scale_and_model_size():
    schedule = TransformerSchedule(d_model=1024, warmup_steps=100, scale=2.0)
    np.testing.assert_allclose(float(schedule(50)), formula(50, 1024, 100, 2.0), rtol=1e-6)


def test_accumulation_counts_updates():
    schedule = TransformerSchedule(warmup_steps=10, accumulation_steps=4)
    # Keras passes the micro-batch count: micro-batches 40..43 are update 10.
    for micro in (40, 41, 43):
        np.testing.assert_allclose(float(schedule(micro)), formula(10, warmup=10), rtol=1e-6)


def test_step_zero_is_step_one():
    schedule = TransformerSchedule()
    assert float(schedule(0)) == pytest.approx(formula(1))


def test_paper_optimizer():
    optimizer = paper_optimizer(d_model=512, accumulation_steps=2)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    assert optimizer.gradient_accumulation_steps == 2
    assert isinstance(optimizer._learning_rate, TransformerSchedule)
    assert paper_optimizer().gradient_accumulation_steps is None


def test_saved_and_restored_with_the_optimizer(tmp_path):
    model = micro_model()
    model.compile(
        optimizer=paper_optimizer(d_model=16, warmup_steps=10),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    source = np.random.default_rng(0).integers(1, 20, (4, 5))
    model.fit((source, source), source, epochs=3, verbose=0)
    path = os.path.join(tmp_path, "m.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    schedule = restored.optimizer._learning_rate
    assert isinstance(schedule, TransformerSchedule)
    assert schedule.get_config() == model.optimizer._learning_rate.get_config()
    assert int(restored.optimizer.iterations) == 3
    assert float(restored.optimizer.learning_rate) == pytest.approx(formula(3, 16, 10))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(d_model=0), "d_model"),
        (dict(warmup_steps=-1), "warmup_steps"),
        (dict(scale=0), "scale"),
        (dict(accumulation_steps=0), "accumulation_steps"),
    ],
)
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"Received: {name}="):
        TransformerSchedule(**kwargs)

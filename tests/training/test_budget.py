import json
import math
import os
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import training
from keras_transformer.training import BudgetPlan
from keras_transformer.training import BudgetSchedule
from keras_transformer.training import TimeBudget
from keras_transformer.training import TransformerSchedule
from keras_transformer.training import averaging_checkpoint_paths
from keras_transformer.training import time_budget as clock_module
from keras_transformer.training.budget import ScheduleFitter
from keras_transformer.training.budget import read_budget
from tests.micro import micro_model
from tests.training.helpers import train_quietly

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design


def reference(step, peak, total, fraction, cap, decay):
    """The schedule written out in plain Python."""
    step = max(step, 1)
    warmup = min(cap, max(1, round(fraction * total)))
    if step < warmup:
        return peak * step / warmup
    progress = min(1.0, max(0.0, (step - warmup) / max(total - warmup, 1)))
    if decay == "linear":
        return peak * (1 - progress)
    return peak * 0.5 * (1 + math.cos(math.pi * progress))


@pytest.mark.parametrize("decay", ["linear", "cosine"])
@pytest.mark.parametrize("total, fraction, cap", [(1000, 0.1, 4000), (20_000, 0.1, 800)])
def test_schedule_equals_the_formula(decay, total, fraction, cap):
    schedule = BudgetSchedule(2e-3, total, fraction, cap, decay)
    steps = np.unique(np.linspace(0, 1.2 * total, 97).astype(int))
    rates = keras.ops.convert_to_numpy(schedule(steps))
    expected = [reference(int(s), 2e-3, total, fraction, cap, decay) for s in steps]
    np.testing.assert_allclose(rates, expected, rtol=1e-5, atol=1e-9)
    assert schedule.warmup_updates() == min(cap, round(fraction * total))
    assert float(schedule(total)) == 0.0 and float(schedule(2 * total)) == 0.0


def test_moving_the_end_rescales_warmup_and_decay():
    schedule = BudgetSchedule(1e-3, 10_000, warmup_fraction=0.2)
    schedule.set_total_steps(500)
    assert schedule.warmup_updates() == 100
    np.testing.assert_allclose(float(schedule(100)), 1e-3, rtol=1e-6)  # the peak
    np.testing.assert_allclose(float(schedule(300)), 0.5e-3, rtol=1e-6)  # half-way down
    assert float(schedule(500)) == 0.0


def test_warmup_steps_method_is_deprecated_for_warmup_updates():
    schedule = BudgetSchedule(1e-3, 1000, warmup_fraction=0.1, max_warmup_steps=50)
    with pytest.warns(DeprecationWarning, match="warmup_updates"):
        assert schedule.warmup_steps(2000) == schedule.warmup_updates(2000) == 50


def test_accumulation_counts_updates():
    schedule = BudgetSchedule(1e-3, 100, warmup_fraction=0.1, accumulation_steps=4)
    for micro in (20, 21, 23):  # update 5, half of the warm-up
        np.testing.assert_allclose(float(schedule(micro)), 0.5e-3, rtol=1e-6)


def test_serialization_keeps_the_current_end():
    schedule = BudgetSchedule(1e-3, 10_000, 0.05, 300, "cosine", 2)
    schedule.set_total_steps(1234)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert isinstance(restored, BudgetSchedule)
    assert restored.get_config() == schedule.get_config()
    steps = np.arange(0, 3000, 7)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(restored(steps)), keras.ops.convert_to_numpy(schedule(steps))
    )


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(peak_learning_rate=0), "peak_learning_rate"),
        (dict(total_steps=0), "total_steps"),
        (dict(warmup_fraction=1.0), "warmup_fraction"),
        (dict(decay="step"), "decay"),
        (dict(max_warmup_steps=0), "max_warmup_steps"),
    ],
)
def test_bad_schedule_arguments(kwargs, name):
    arguments = {"peak_learning_rate": 1e-3, "total_steps": 100, **kwargs}
    with pytest.raises(ValueError, match=f"Received: {name}="):
        BudgetSchedule(**arguments)


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def fake_model(iterations):
    optimizer = types.SimpleNamespace(iterations=iterations)
    return types.SimpleNamespace(
        optimizer=optimizer, distribute_strategy=tf.distribute.get_strategy()
    )


def run_budget(monkeypatch, tmp_path, seconds_per_step, updates, max_steps=None, **options):
    """Drives a `ScheduleFitter` of a `TimeBudget(**options)` (and a
    default `BudgetPlan`) through
    `updates` updates that each take `seconds_per_step` of a fake clock;
    returns the fitter and the updates it wanted checkpointed."""
    clock = FakeClock()
    monkeypatch.setattr(clock_module.time, "time", clock)
    iterations = tf.Variable(0, dtype=tf.int64)
    schedule = BudgetSchedule(1e-3, 100_000, warmup_fraction=0.1, max_warmup_steps=4000)
    budget = TimeBudget(**options)
    fitter = ScheduleFitter(schedule, budget, max_steps=max_steps, model_dir=str(tmp_path))
    fitter.set_model(fake_model(iterations))
    fitter.on_train_begin()
    wanted = []
    for batch in range(updates):
        clock.now += seconds_per_step
        iterations.assign_add(1)
        fitter.on_train_batch_end(batch)
        if budget.left() < 0:
            break
        if fitter.wants_checkpoint(int(iterations.numpy())):
            wanted.append(int(iterations.numpy()))
    return fitter, wanted


def test_estimates_the_updates_the_budget_allows(monkeypatch, tmp_path):
    # 1,000 s at 2 s an update, 200 s kept in reserve: 400 updates.
    fitter, wanted = run_budget(
        monkeypatch, tmp_path, 2.0, 10_000, seconds=1000, reserve_seconds=200
    )
    assert fitter.total_steps == 400 and fitter.schedule.warmup_updates() == 40
    assert fitter.seconds_per_step == pytest.approx(2.0)
    # Averaging: 5 checkpoints spread over the last 20% (updates 321-400).
    assert fitter.averaging_from() == 321
    assert wanted == [321, 337, 353, 369, 385]
    recorded = json.loads((tmp_path / "budget.json").read_text())
    assert recorded == {
        "seconds_per_step": pytest.approx(2.0),
        "total_steps": 400,
        "warmup_updates": 40,
        "averaging_from": 321,
    }


def test_a_slower_machine_gets_a_shorter_schedule(monkeypatch, tmp_path):
    fast, _ = run_budget(monkeypatch, tmp_path, 1.0, 10_000, seconds=600)
    slow, _ = run_budget(monkeypatch, tmp_path, 2.6, 10_000, seconds=600)
    assert (fast.total_steps, slow.total_steps) == (600, 230)
    # The warm-up stays the same fraction, the averaging window never
    # reaches into it.
    assert (fast.schedule.warmup_updates(), slow.schedule.warmup_updates()) == (60, 23)
    assert slow.averaging_from() > slow.schedule.warmup_updates()


def test_max_steps_caps_the_estimate(monkeypatch, tmp_path):
    fitter, _ = run_budget(monkeypatch, tmp_path, 1.0, 100, seconds=1000, max_steps=50)
    assert fitter.total_steps == 50


def test_one_clock_from_when_the_budget_began_less_the_reserve(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(clock_module.time, "time", clock)
    clock.now = 1000.0
    budget = TimeBudget(600, started=900.0, reserve_seconds=50)  # began 100 s ago
    assert budget.elapsed() == 100.0 and budget.left() == 450.0
    clock.now += 200
    budget.reserve_seconds = 120  # what the later stages now look like
    assert budget.left() == 600 - 300 - 120
    assert TimeBudget(10).started == clock.now  # default: now


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(seconds=0), "seconds"),
        (dict(seconds=True), "seconds"),
        (dict(reserve_seconds=-1), "reserve_seconds"),
    ],
)
def test_bad_budget_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"Received: {name}="):
        TimeBudget(**{"seconds": 60, **kwargs})


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(warmup_fraction=1.0), "warmup_fraction"),
        (dict(decay="step"), "decay"),
        (dict(averaging_checkpoints=0), "averaging_checkpoints"),
        (dict(averaging_fraction=0.0), "averaging_fraction"),
    ],
)
def test_bad_plan_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"Received: {name}="):
        BudgetPlan(**kwargs)


def test_train_refuses_a_plan_of_another_type(tmp_path):
    with pytest.raises(ValueError, match="budget_plan"):
        train_quietly(tmp_path, 2, budget=TimeBudget(60), budget_plan={"warmup_fraction": 0.1})


def test_train_under_a_time_budget_decays_to_zero_and_averages_late(tmp_path):
    # The time budget is ample, so `train_steps` ends the run: the
    # schedule reaches zero there and the averaging checkpoints lie in its
    # last 20%, whatever the machine's speed.
    result = train_quietly(
        tmp_path,
        30,
        steps_per_checkpoint=10,
        budget=TimeBudget(3600),
        budget_plan=BudgetPlan(averaging_checkpoints=3),
    )
    schedule = read_budget(str(tmp_path))
    assert result.budget == schedule and schedule["total_steps"] == 30
    assert schedule["warmup_updates"] == 3 and schedule["averaging_from"] == 25
    steps = [int(p.rsplit("-", 1)[1]) for p in averaging_checkpoint_paths(str(tmp_path), 3)]
    assert steps == [27, 29, 30]
    assert all(s >= 25 for s in steps)


def test_averaging_checkpoints_are_kept_apart_from_the_rotation(tmp_path):
    # 50 updates, the window their last 20% (41-50): 5 averaging
    # checkpoints every 2 updates, whatever `keep_checkpoints` keeps of
    # the regular ones (here the last 2, at 40 and 50).
    train_quietly(
        tmp_path,
        50,
        steps_per_checkpoint=10,
        keep_checkpoints=2,
        budget=TimeBudget(3600),
        budget_plan=BudgetPlan(averaging_checkpoints=5),
    )
    assert read_budget(str(tmp_path))["averaging_from"] == 41
    regular = [int(p.rsplit("-", 1)[1]) for p in training.checkpoint_paths(str(tmp_path))]
    assert regular == [40, 50]
    steps = [int(p.rsplit("-", 1)[1]) for p in averaging_checkpoint_paths(str(tmp_path), 5)]
    assert steps == [43, 45, 47, 49, 50]  # spread over the window, the last update last
    # Their own rotation: at most 5, all in the window.
    kept = {name.split(".")[0] for name in os.listdir(tmp_path / "averaging")}
    assert kept == {f"ckpt-{s}" for s in (41, 43, 45, 47, 49)}
    # Averaged like any checkpoints.
    paths = averaging_checkpoint_paths(str(tmp_path), 5)
    averaged = training.average_checkpoints(micro_model(), paths)
    assert all(np.isfinite(w).all() for w in averaged.get_weights())


def test_step_bounded_runs_keep_the_papers_schedule_unless_asked(tmp_path):
    paper, budget = micro_model(), micro_model()
    train_quietly(tmp_path / "paper", 2, paper)
    assert isinstance(paper.optimizer._learning_rate, TransformerSchedule)
    result = train_quietly(tmp_path / "budget", 4, budget, learning_rate_schedule="budget")
    assert isinstance(budget.optimizer._learning_rate, BudgetSchedule)
    assert float(budget.optimizer.learning_rate) == 0.0  # decayed to zero at train_steps
    assert result.budget is None  # nothing estimated without a time budget
    # Without a recorded budget, the paper's newest checkpoints.
    assert (
        averaging_checkpoint_paths(str(tmp_path / "paper"), 5)
        == training.checkpoint_paths(str(tmp_path / "paper"))[-5:]
    )


def test_training_stops_where_the_budget_schedule_ends(monkeypatch):
    """Issue 77, item 19: a 5-minute run whose schedule had decayed to zero
    at update 400 trained one more update, with another evaluation and
    checkpoint, and ended past its budget. Training now stops at the
    schedule's end, time left or not, as it does past the budget."""
    from keras_transformer.training.callbacks import CheckpointAndStop

    clock = FakeClock()
    monkeypatch.setattr(clock_module.time, "time", clock)
    iterations = tf.Variable(0, dtype=tf.int64)
    fitter = types.SimpleNamespace(total_steps=5, wants_checkpoint=lambda step: False)
    for with_fitter, stops_at in ((True, 5), (False, 8)):
        iterations.assign(0)
        clock.now = 0.0
        budget = TimeBudget(7.5)
        stop = CheckpointAndStop(None, None, 100, budget, fitter if with_fitter else None)
        stop.set_model(fake_model(iterations))
        stop.model.stop_training = False
        while not stop.model.stop_training:
            clock.now += 1.0
            iterations.assign_add(1)
            stop.on_train_batch_end(0)
        assert (int(iterations.numpy()), stop.out_of_time) == (stops_at, True)

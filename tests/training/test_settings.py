"""`TrainingSettings`: the recipe as one value, checked once, read by
`train` and `compile_for_training`, and the former keyword arguments."""

import inspect
import json
import warnings

import pytest

from keras_transformer import training
from tests.micro import micro_model
from tests.training.helpers import reversal_batches

pytestmark = pytest.mark.tensorflow_only  # `train` needs TensorFlow


def test_the_defaults_are_the_papers_recipe():
    settings = training.TrainingSettings()
    assert (settings.warmup_steps, settings.label_smoothing, settings.learning_rate_scale) == (
        4000,
        0.1,
        1.0,
    )
    assert (settings.accumulation_steps, settings.ema_momentum, settings.keep_best) == (1, None, 0)
    optimizer, schedule = settings.optimizer(d_model=512)
    assert schedule is None  # no budget: the paper's schedule
    # lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5) on Adam(0.9, 0.98, 1e-9)
    for step in (1, 100, 4000, 20000):
        expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
        assert float(optimizer._learning_rate(step)) == pytest.approx(expected, rel=1e-6)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)


def test_the_budget_schedule_peaks_where_the_papers_would():
    settings = training.TrainingSettings(
        train_steps=1000, warmup_steps=400, learning_rate_schedule="budget"
    )
    _, schedule = settings.optimizer(d_model=64)
    # Warm-up: 10% of the updates (the plan's), at most 400, to the paper's peak.
    assert schedule.warmup_updates() == 100
    assert float(schedule(100)) == pytest.approx((64 * 400) ** -0.5, rel=1e-6)
    assert float(schedule(1000)) == pytest.approx(0.0, abs=1e-9)  # zero at the run's end
    budgeted = training.TrainingSettings(budget=training.TimeBudget(60))
    assert budgeted.optimizer(64)[1] is not None  # "auto" under a budget


@pytest.mark.parametrize(
    "field, value",
    [
        ("train_steps", 0),
        ("steps_per_checkpoint", 1.5),
        ("warmup_steps", -1),
        ("accumulation_steps", 0),
        ("learning_rate_schedule", "cosine"),
        ("learning_rate_scale", 0),
        ("label_smoothing", 1.0),
        ("label_smoothing", "0.1"),
        ("precision", "fp8"),
        ("jit_compile", "yes"),
        ("budget", 60),
        ("budget_plan", {"warmup_fraction": 0.1}),
        ("keep_best", -1),
        ("best_monitor", "bleu"),
        ("patience", 0),
        ("min_delta", -1.0),
        ("restore_best_weights", 1),
        ("evaluate_every", 0),
        ("ema_momentum", 1.0),
        ("freeze", ("encoder", "attention")),
        ("lora_rank", 0),
        ("lora_alpha", -2.0),
        ("tensorboard", "yes"),
        ("verbose", 3),
    ],
)
def test_a_bad_value_is_refused_by_name(field, value):
    arguments = {field: value}
    if field == "lora_alpha":
        arguments["lora_rank"] = 4
    with pytest.raises(ValueError, match=f"Received: {field}="):
        training.TrainingSettings(**arguments)


def test_checks_across_fields():
    with pytest.raises(ValueError, match="needs a `lora_rank`"):
        training.TrainingSettings(lora_alpha=16.0)
    with pytest.raises(ValueError, match="evaluate_every.*steps_per_checkpoint"):
        training.TrainingSettings(steps_per_checkpoint=100, evaluate_every=150)
    settings = training.TrainingSettings()
    with pytest.raises(ValueError, match="Unknown training setting.*warmup_steps"):
        settings.replace(warmup=100)
    assert settings.replace(warmup_steps=100).warmup_steps == 100
    with pytest.raises(ValueError, match="Received: warmup_steps=0"):
        settings.replace(warmup_steps=0)


def test_freeze_is_a_tuple_in_the_models_order_and_the_record_is_plain_json():
    settings = training.TrainingSettings(
        freeze="decoder, embeddings", budget=training.TimeBudget(1800), learning_rate_scale=2
    )
    assert settings.freeze == ("embeddings", "decoder")
    record = json.loads(json.dumps(settings.to_dict()))
    assert record["budget"] == 1800.0 and record["freeze"] == ["embeddings", "decoder"]
    assert record["budget_plan"]["warmup_fraction"] == 0.1
    assert record["learning_rate_scale"] == 2.0 and set(record) == set(settings.names())


def test_train_and_compile_take_the_settings_in_few_parameters():
    parameters = inspect.signature(training.train).parameters
    assert len(parameters) <= 8
    assert not set(parameters) & set(training.TrainingSettings.names())  # the recipe: settings
    assert list(inspect.signature(training.compile_for_training).parameters) == [
        "model",
        "settings",
        "optimizer",
    ]
    model = training.compile_for_training(
        micro_model(), training.TrainingSettings(label_smoothing=0.2, warmup_steps=10)
    )
    assert model.loss.label_smoothing == pytest.approx(0.2)
    rate = float(model.optimizer._learning_rate(5))
    assert rate == pytest.approx(model.d_model**-0.5 * 5 * 10**-1.5, rel=1e-6)


def test_a_precision_other_than_the_models_is_refused(tmp_path):
    settings = training.TrainingSettings(train_steps=2, precision="bf16", tensorboard=False)
    with pytest.raises(ValueError, match="precision.*'float32'.*dtype=settings.dtype_policy"):
        training.train(micro_model(), reversal_batches(), str(tmp_path), settings)
    with warnings.catch_warnings():  # the emulated-bfloat16 warning of CPUs without it
        warnings.simplefilter("ignore", RuntimeWarning)
        assert training.TrainingSettings(precision="bf16").dtype_policy() == "mixed_bfloat16"
    assert training.TrainingSettings().dtype_policy() is None  # the model's own


def test_the_former_keyword_arguments_still_train_with_a_warning_naming_the_field(tmp_path):
    best = training.BestCheckpoints("val_loss", keep=1, patience=3)
    with pytest.warns(DeprecationWarning) as caught:
        result = training.train(
            micro_model(),
            reversal_batches(),
            str(tmp_path),
            4,  # train_steps, where the settings go now
            steps_per_checkpoint=2,
            warmup_steps=3,
            best=best,
            validation_data=reversal_batches(20, seed=1),
            tensorboard=False,
            verbose=0,
        )
    messages = " ".join(str(w.message) for w in caught)
    for name in ("train_steps", "steps_per_checkpoint", "warmup_steps", "tensorboard"):
        assert f"TrainingSettings({name}=...)" in messages
    assert "best_monitor, keep_best, patience" in messages
    assert result.final_step == 4
    expected = training.TrainingSettings(
        train_steps=4,
        steps_per_checkpoint=2,
        warmup_steps=3,
        best_monitor="val_loss",
        keep_best=1,
        patience=3,
        tensorboard=False,
        verbose=0,
    )
    assert result.settings == expected
    with pytest.warns(DeprecationWarning, match=r"TrainingSettings\(label_smoothing=...\)"):
        model = training.compile_for_training(micro_model(), label_smoothing=0.0)
    assert model.loss.label_smoothing == 0.0
    with pytest.raises(TypeError, match="unexpected keyword argument 'warmup'"):
        training.compile_for_training(micro_model(), warmup=3)

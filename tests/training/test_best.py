"""Best checkpoints by a validation score, and early stopping, in `train`."""

import os

import keras
import numpy as np
import pytest

from keras_transformer import training
from keras_transformer_runtime import Runner
from tests.micro import micro_model
from tests.training.helpers import train_quietly

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

# Validation BLEU by update step: best at 4, then three worse evaluations.
SCRIPT = {2: 10.0, 4: 30.0, 6: 20.0, 8: 25.0, 10: 15.0, 12: 31.0, 14: 5.0, 16: 5.0}


class ScriptedEvaluator(training.TranslationEvaluator):
    """Reports `SCRIPT`'s score for the step instead of translating."""

    def __init__(self):
        super().__init__(Echo(), ["source"], ["reference"], verbose=0)

    def evaluate(self, step):
        scores = {"val_bleu": SCRIPT[step], "val_chrf": SCRIPT[step] / 2}
        self.history.append({"step": step, **scores, "seconds": 0.0})
        return scores


class Echo(Runner):
    def translate(self, sentences, batch_size=64, progress=None):
        return list(sentences)


class Snapshots(keras.callbacks.Callback):
    """The model's weights at each epoch end, by update step."""

    def __init__(self):
        super().__init__()
        self.weights = {}

    def on_epoch_end(self, epoch, logs=None):
        self.weights[int(self.model.optimizer.iterations)] = self.model.get_weights()


def run(model_dir, train_steps, model=None, callbacks=(), **options):
    """`train` with the scripted evaluator every 2 updates and, unless
    `options` say otherwise, the best 2 checkpoints by validation BLEU."""
    options = {
        "steps_per_checkpoint": 2,
        "keep_checkpoints": 2,
        "warmup_steps": 4,
        "evaluator": ScriptedEvaluator(),
        "best_monitor": "val_bleu",
        "keep_best": 2,
        **options,
    }
    return train_quietly(model_dir, train_steps, model, callbacks=list(callbacks), **options)


def patient(patience, **options):
    """The settings of the best 2 checkpoints by validation BLEU, and early
    stopping."""
    return {"best_monitor": "val_bleu", "keep_best": 2, "patience": patience, **options}


def assert_weights_equal(actual, expected):
    for a, b in zip(actual, expected, strict=True):
        np.testing.assert_array_equal(a, b)


def test_best_kept_after_worse_ones_and_early_stopping_ends_the_run(tmp_path):
    model, snapshots = micro_model(), Snapshots()
    result = run(tmp_path, 40, model, [snapshots], **patient(3, restore_best_weights=True))
    # 30 at step 4, then 20, 25, 15: three evaluations without improvement.
    assert result.stopped_early and result.final_step == 10
    assert [e["val_bleu"] for e in result.evaluations] == [10.0, 30.0, 20.0, 25.0, 15.0]
    assert result.best_checkpoint == os.path.join(tmp_path, "best", "ckpt-4")
    # The regular rotation deleted ckpt-4; the best are kept, best first.
    assert [os.path.basename(p) for p in training.checkpoint_paths(tmp_path)] == [
        "ckpt-8",
        "ckpt-10",
    ]
    best = training.best_checkpoint_paths(tmp_path)
    assert [os.path.basename(p) for p in best] == ["ckpt-4", "ckpt-8"]
    files = [f"ckpt-{s}.{e}" for s in (4, 8) for e in ("index", "data-00000-of-00001")]
    assert sorted(os.listdir(tmp_path / "best")) == sorted(["scores.json", *files])
    # restore_best_weights: the model holds step 4's weights.
    assert_weights_equal(model.get_weights(), snapshots.weights[4])
    # The best-2 average is the mean of steps 4 and 8.
    averaged = training.average_checkpoints(micro_model(), best)
    pairs = zip(snapshots.weights[4], snapshots.weights[8], strict=True)
    expected = [(a.astype("float64") + b) / 2 for a, b in pairs]
    for a, b in zip(averaged.get_weights(), expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)

    # A rerun of the stopped run returns at once...
    again = run(tmp_path, 40, **patient(3))
    assert again.stopped_early and again.final_step == 10 and again.history == {}
    # ...unless allowed more patience (here: none).
    more = run(tmp_path, 14, **patient(None))
    assert not more.stopped_early and (more.initial_step, more.final_step) == (10, 14)
    assert [e["step"] for e in more.evaluations] == [2, 4, 6, 8, 10, 12, 14]
    # 31 at step 12 is the new best; 25 (step 8) drops out of the best two.
    best = training.best_checkpoint_paths(tmp_path)
    assert [os.path.basename(p) for p in best] == ["ckpt-12", "ckpt-4"]
    assert not os.path.exists(tmp_path / "best" / "ckpt-8.index")
    # The best checkpoints rank by val_bleu: another score is refused.
    with pytest.raises(ValueError, match="val_chrf"):
        run(tmp_path, 16, best_monitor="val_chrf")


def test_a_resumed_run_knows_its_best_score_and_patience(tmp_path):
    # Interrupted after step 6 (best 30 at step 4, one evaluation without
    # improvement), then resumed: it stops at step 10, as an uninterrupted run.
    first = run(tmp_path, 6, **patient(3))
    assert not first.stopped_early and first.final_step == 6
    resumed = run(tmp_path, 40, **patient(3))
    assert resumed.stopped_early and (resumed.initial_step, resumed.final_step) == (6, 10)
    assert [e["step"] for e in resumed.evaluations] == [2, 4, 6, 8, 10]
    assert [e["step"] for e in training.read_evaluations(tmp_path)] == [2, 4, 6, 8, 10]
    assert os.path.basename(resumed.best_checkpoint) == "ckpt-4"


def test_a_save_cut_short_leaves_nothing_that_stops_the_rerun(tmp_path):
    # A process killed while TensorFlow writes a checkpoint leaves its
    # shards in a `<prefix>_temp` directory: here step 8's, in both the
    # regular and the best checkpoints, after a run of 6 steps.
    run(tmp_path, 6)
    for directory in ("checkpoints", "best"):
        shards = tmp_path / directory / "ckpt-8_temp"
        shards.mkdir()
        (shards / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"cut short")
    resumed = run(tmp_path, 10)
    assert (resumed.initial_step, resumed.final_step) == (6, 10)
    names = [os.path.basename(p) for p in training.best_checkpoint_paths(tmp_path)]
    assert names == ["ckpt-4", "ckpt-8"]  # 30 and 25, as a run without the kill
    files = [f"ckpt-{s}.{e}" for s in (4, 8) for e in ("index", "data-00000-of-00001")]
    assert sorted(os.listdir(tmp_path / "best")) == sorted(["scores.json", *files])
    assert not (tmp_path / "checkpoints" / "ckpt-8_temp").exists()


class KilledWhileEvaluating(ScriptedEvaluator):
    """`ScriptedEvaluator`, but the process is killed (KeyboardInterrupt)
    while it evaluates step `at`."""

    def __init__(self, at):
        super().__init__()
        self.at = at

    def evaluate(self, step):
        if step == self.at:
            raise KeyboardInterrupt
        return super().evaluate(step)


@pytest.mark.parametrize("killed_at", [4, 8])  # inside the run, and its last update
def test_a_run_killed_while_evaluating_finishes_that_evaluation_on_resume(tmp_path, killed_at):
    import tensorflow as tf

    from tests.training.helpers import reversal_batches

    # One fixed batch: every evaluation scores the same pairs.
    batch = next(iter(reversal_batches(20, seed=1).dataset))
    validation = {"validation_data": tf.data.Dataset.from_tensors(batch)}
    keras.utils.set_random_seed(0)
    uninterrupted = run(tmp_path / "whole", 8, micro_model(), **validation)
    keras.utils.set_random_seed(0)  # the same weights and dropout up to the kill
    with pytest.raises(KeyboardInterrupt):
        killer = KilledWhileEvaluating(killed_at)
        run(tmp_path / "killed", 8, micro_model(), evaluator=killer, **validation)
    # The checkpoint of the step being evaluated was written first.
    steps = [os.path.basename(p) for p in training.checkpoint_paths(tmp_path / "killed")]
    assert steps[-1] == f"ckpt-{killed_at}"
    assert killed_at not in [e["step"] for e in training.read_evaluations(tmp_path / "killed")]

    resumed = run(tmp_path / "killed", 8, micro_model(), **validation)
    assert resumed.initial_step == killed_at
    # Every evaluation of the uninterrupted run, the owed one scored on the
    # same weights: the same validation loss at the step it resumed from.
    assert [e["step"] for e in resumed.evaluations] == [2, 4, 6, 8]
    assert [e["val_bleu"] for e in resumed.evaluations] == [SCRIPT[s] for s in (2, 4, 6, 8)]
    assert resumed.evaluations == training.read_evaluations(tmp_path / "killed")
    owed = next(e for e in resumed.evaluations if e["step"] == killed_at)
    expected = next(e for e in uninterrupted.evaluations if e["step"] == killed_at)
    assert owed["val_loss"] == pytest.approx(expected["val_loss"], rel=1e-5)
    # Step 4 (the best score) became a best checkpoint, as in the whole run.
    names = [os.path.basename(p) for p in training.best_checkpoint_paths(tmp_path / "killed")]
    assert names == ["ckpt-4", "ckpt-8"]
    whole = training.best_checkpoint_paths(tmp_path / "whole")
    assert names == [os.path.basename(p) for p in whole]
    # A rerun owes nothing more.
    again = run(tmp_path / "killed", 8, micro_model(), **validation)
    assert again.evaluations == resumed.evaluations


def test_an_averaging_checkpoint_inside_an_epoch_owes_no_evaluation():
    from keras_transformer.training.watching import owed_evaluation

    evaluator = ScriptedEvaluator()
    evaluator.every = 4
    done = [{"step": 2}]
    assert owed_evaluation(3, done, 2, 10, evaluator, None) == set()  # inside an epoch
    assert owed_evaluation(2, done, 2, 10, evaluator, "data") == set()  # recorded
    assert owed_evaluation(6, done, 2, 10, evaluator, None) == set()  # not the evaluator's
    assert set(owed_evaluation(6, done, 2, 10, evaluator, "data")) == {"loss"}
    assert set(owed_evaluation(8, done, 2, 10, evaluator, None)) == {"translation"}
    assert set(owed_evaluation(10, done, 4, 10, evaluator, None)) == {"translation"}  # the last
    assert owed_evaluation(0, [], 2, 10, evaluator, "data") == set()


def test_min_delta_counts_small_gains_as_no_improvement(tmp_path):
    # 31 at step 12 beats 30 by 1, less than min_delta: the fourth
    # evaluation in a row without improvement, so the run stops there.
    # (Without min_delta, 31 would improve and the run go on.)
    result = run(tmp_path, 40, **patient(4, min_delta=1.5))
    assert result.stopped_early and result.final_step == 12


def test_keep_best_on_validation_loss(tmp_path):
    from tests.training.helpers import reversal_batches

    result = train_quietly(
        tmp_path,
        6,
        steps_per_checkpoint=2,
        warmup_steps=4,
        validation_data=reversal_batches(20, seed=1),
        validation_steps=1,
        best_monitor="val_loss",
        keep_best=1,
    )
    losses = {e["step"]: e["val_loss"] for e in result.evaluations}
    assert result.best_checkpoint.endswith(f"ckpt-{min(losses, key=losses.get)}")


@pytest.mark.parametrize(
    "options, name",
    [
        ({"evaluator": None}, "best_monitor"),
        ({"best_monitor": "bleu"}, "best_monitor"),
        ({"patience": 0}, "patience"),
        ({"min_delta": -1.0}, "min_delta"),
        ({"keep_best": -1}, "keep_best"),
        ({"evaluator": "bleu"}, "evaluator"),
    ],
)
def test_bad_arguments(tmp_path, options, name):
    with pytest.raises(ValueError, match=f"Received: {name}="):
        run(tmp_path, 4, **options)
    assert not os.path.exists(tmp_path / "checkpoints")


def test_a_bad_mode_is_refused():
    with pytest.raises(ValueError, match="Received: mode="):
        training.BestCheckpoints(mode="up")


def test_mode_says_which_way_a_score_improves():
    assert training.BestCheckpoints("val_bleu").mode == "max"
    assert training.BestCheckpoints("val_loss").mode == "min"
    assert training.BestCheckpoints("val_perplexity").mode == "min"
    assert training.BestCheckpoints("val_loss", mode="max").mode == "max"

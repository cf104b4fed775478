"""`DropoutFitter` in `train`: the model's P_drop set from the passes the
run makes, once, recorded, and kept by a resumed run."""

import keras
import pytest

from keras_transformer.training import DropoutByPasses
from keras_transformer.training import TimeBudget
from keras_transformer.training.dropout_fitter import read_dropout
from tests.micro import micro_model
from tests.training.helpers import reversal_batches
from tests.training.helpers import train_quietly

pytestmark = [pytest.mark.tensorflow_only, pytest.mark.large]  # TensorFlow's `train`; trains


def residual_rates(model):
    """The rate of every dropout `set_dropout` sets, layer by layer."""
    rates = [model.embedding_dropout.rate]
    for stack in (model.encoder, model.decoder):
        for layer in stack.stack:
            rates += [dropout.rate for dropout in layer._residual_dropouts()]
    return rates


class TrainFunctions(keras.callbacks.Callback):
    """The update after which each new train function was first used."""

    def on_train_begin(self, logs=None):
        self.seen, self.made_after = None, []

    def on_train_batch_end(self, batch, logs=None):
        if self.model.train_function is not self.seen:
            self.seen = self.model.train_function
            self.made_after.append(int(self.model.optimizer.iterations.numpy()))


def test_a_fixed_number_of_updates_chooses_before_the_first(tmp_path):
    # 20 updates of 2 per pass: 10 passes, a fifth of the way from the
    # default rates' 0.1 at 9 passes to 0.2 at 14.
    model = micro_model(dropout=0.3, seed=1)
    functions = TrainFunctions()
    plan = DropoutByPasses(updates_per_pass=2)
    result = train_quietly(tmp_path, 20, model, steps_per_checkpoint=10, dropout_by_passes=plan,
                           callbacks=[functions])  # fmt: skip
    chosen = {"rate": 0.12, "passes": 10.0, "step": 0}
    assert read_dropout(str(tmp_path)) == result.dropout == chosen
    assert model.dropout == 0.12 and set(residual_rates(model)) == {0.12}
    assert functions.made_after == [1]  # the one traced first: no retrace


def test_a_time_budget_chooses_once_its_estimate_settles_and_a_resumed_run_keeps_it(tmp_path):
    # The budget is ample, so the run's 40 updates end it: 13 passes of 3
    # updates, 0.1 + 0.1 * (13.33 - 9) / 5. The fitter's first estimate
    # comes after 15 updates, so the choice is at the checkpoint of update
    # 20 (the warm-up, 4 updates, is over by then), and the train function
    # is made again there.
    model = micro_model(dropout=0.3, seed=1)
    functions = TrainFunctions()
    plan = DropoutByPasses(updates_per_pass=3)
    options = dict(steps_per_checkpoint=10, budget=TimeBudget(3600), dropout_by_passes=plan)
    batches = reversal_batches()
    result = train_quietly(tmp_path, 40, model, batches, callbacks=[functions], **options)
    chosen = result.dropout
    assert chosen == {"rate": 0.1867, "passes": 13.33, "step": 20}
    assert model.dropout == 0.1867 and set(residual_rates(model)) == {0.1867}
    assert functions.made_after == [1, 21]
    # Resumed for 20 more updates (20 passes, 0.2 by the plan): the rate
    # chosen stays, set before the first update.
    resumed = micro_model(dropout=0.3, seed=1)
    train_quietly(tmp_path, 60, resumed, batches, callbacks=[functions], **options)
    assert read_dropout(str(tmp_path)) == chosen
    assert resumed.dropout == 0.1867 and set(residual_rates(resumed)) == {0.1867}
    assert functions.made_after == [41]


def test_refuses_a_model_it_cannot_set(tmp_path):
    model = keras.Sequential([keras.layers.Dense(4)])
    with pytest.raises(ValueError, match="dropout_by_passes"):
        train_quietly(tmp_path, 2, model, dropout_by_passes=DropoutByPasses(10))

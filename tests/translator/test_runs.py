"""`Translator.from_run`: a trained run's directory back as a translator,
with the model, tokenizer, weights and settings the run recorded."""

import os
import shutil

import numpy as np
import pytest

from keras_transformer import Translator
from keras_transformer import training
from keras_transformer.training.checkpoints import checkpoint_step
from keras_transformer.translator import record_choice
from tests.micro import micro_model
from tests.training.helpers import letter_reversal_corpus

pytestmark = pytest.mark.tensorflow_only  # TensorFlow checkpoints and tokenizer

SOURCES = ["a b c", "j i h g", "c a", ""]


@pytest.fixture(scope="module")
def run(sentencepiece_tokenizer, tmp_path_factory):
    """A micro model trained 6 updates in a run directory (checkpoints at
    2, 4 and 6), with the tokenizer its batches carry to `train`."""
    model_dir = tmp_path_factory.mktemp("run") / "m"
    model = micro_model(vocab_size=sentencepiece_tokenizer.vocab_size)
    sources, targets = letter_reversal_corpus(64, seed=1)
    batches = training.make_batches(
        training.text_pairs_from_lists(sources, targets),
        sentencepiece_tokenizer,
        batch_tokens=256,
        max_length=16,
        vocab_size=sentencepiece_tokenizer.vocab_size,
    )
    settings = training.TrainingSettings(
        train_steps=6, steps_per_checkpoint=2, warmup_steps=2, tensorboard=False, verbose=0
    )
    training.train(model, batches, str(model_dir), settings)
    return str(model_dir), sentencepiece_tokenizer


def logits(model, tokenizer):
    source = np.array([tokenizer.tokenize("a b c").numpy().tolist() + [tokenizer.eos_id]])
    target = np.array([[tokenizer.bos_id, 5, 6]])
    return np.asarray(model((source, target), training=False))


@pytest.mark.large  # trains
def test_a_run_loads_back_with_its_chosen_weights_and_settings(run):
    model_dir, tokenizer = run
    paths = training.checkpoint_paths(model_dir)
    assert [checkpoint_step(p) for p in paths] == [2, 4, 6]
    model = micro_model(vocab_size=tokenizer.vocab_size)
    training.average_checkpoints(model, paths[:2])
    chosen = Translator(model, tokenizer, beam_size=2, alpha=0.3, max_extra_length=4)
    record_choice(model_dir, chosen, paths[:2], reason="the first two")

    loaded = Translator.from_run(model_dir)
    assert loaded.settings == chosen.settings
    assert loaded.model.dtype_policy.name == model.dtype_policy.name  # recorded
    assert loaded.tokenizer.fingerprint == tokenizer.fingerprint  # the run kept it
    np.testing.assert_allclose(logits(loaded.model, tokenizer), logits(model, tokenizer), atol=1e-5)
    assert loaded.translate(SOURCES) == chosen.translate(SOURCES)
    # A setting changed at load; other checkpoints than the recorded ones.
    greedy = Translator.from_run(model_dir, checkpoint_paths=paths[2:], beam_size=1)
    assert greedy.settings.beam_size == 1 and greedy.settings.alpha == 0.3
    # A model that computed in bfloat16 translates the same only in it.
    bf16 = Translator.from_run(model_dir, dtype="mixed_bfloat16")
    assert bf16.model.dtype_policy.name == "mixed_bfloat16"
    training.average_checkpoints(model, paths[2:])
    np.testing.assert_allclose(logits(greedy.model, tokenizer), logits(model, tokenizer), atol=1e-5)


@pytest.mark.large  # trains
def test_a_run_without_a_recorded_choice_averages_its_last_checkpoints(run, tmp_path):
    """The paper's average of the last checkpoints (at most 5), with the
    default settings; and a run recorded before `train` kept its tokenizer
    finds the example's spm.model."""
    model_dir, tokenizer = run
    copy = tmp_path / "copy"
    shutil.copytree(model_dir, copy)
    os.remove(copy / "translator.json") if (copy / "translator.json").exists() else None
    os.remove(copy / "checkpoints" / "tokenizer.json")
    with pytest.raises(ValueError, match="keeps no tokenizer"):
        Translator.from_run(copy)
    tokenizer.save(copy / "spm.model")
    loaded = Translator.from_run(copy)
    model = micro_model(vocab_size=tokenizer.vocab_size)
    training.average_checkpoints(model, training.checkpoint_paths(copy))
    np.testing.assert_allclose(logits(loaded.model, tokenizer), logits(model, tokenizer), atol=1e-5)
    assert loaded.settings == Translator(model, tokenizer).settings


def test_a_directory_that_is_no_run_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="no such directory"):
        Translator.from_run(tmp_path / "missing")
    with pytest.raises(ValueError, match=r"must be a training run's directory.*run\.json"):
        Translator.from_run(tmp_path)

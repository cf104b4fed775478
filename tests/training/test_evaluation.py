"""`TranslationEvaluator`: validation BLEU and chrF during `train`."""

import glob

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Translator
from keras_transformer import training
from keras_transformer.training.evaluation import averaged_weights_in
from keras_transformer_runtime import Runner
from tests.micro import micro_model
from tests.training.helpers import NumberTokenizer
from tests.training.helpers import number_tokenizer
from tests.training.helpers import substitution_corpus
from tests.training.helpers import tiny_model
from tests.training.helpers import train_quietly

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design


class Echo(Runner):
    """A translator stub that answers with fixed texts."""

    def __init__(self, outputs):
        self.outputs = outputs
        self.calls = 0

    def translate(self, sentences, batch_size=64, progress=None, target_lang=None):
        self.calls += 1
        self.asked = (list(sentences), target_lang)
        return list(self.outputs)[: len(sentences)]


def test_scores_are_sacrebleus_on_perfect_and_empty_output():
    references = ["a b c d e", "f g h i j k"]
    for outputs, expected in ((references, 100.0), (["", ""], 0.0)):
        evaluator = training.TranslationEvaluator(Echo(outputs), ["x", "y"], references, verbose=0)
        evaluator.set_model(micro_model())
        scores = evaluator.evaluate(step=1)
        assert scores == pytest.approx({"val_bleu": expected, "val_chrf": expected})
    assert evaluator.signatures["val_bleu"].startswith("nrefs:1|")
    assert "chrF2" in evaluator.signatures["val_chrf"] or "nc:6" in evaluator.signatures["val_chrf"]


def test_a_multilingual_evaluation_scores_each_language_and_their_mean():
    """Two directions, 3 sentences each, evaluated on 2 of each: the
    German outputs are perfect, the French ones empty; the scores are
    each language's sacreBLEU and their mean, not the pooled BLEU."""
    references = ["a b c d e", "f g h i j", "k l m n o", "p q r s t", "u v w x y", "z y x w v"]
    outputs = ["a b c d e", "f g h i j", "", ""]
    target_lang = ["de", "de", "de", "fr", "fr", "fr"]
    echo = Echo(outputs)
    evaluator = training.TranslationEvaluator(
        echo, list("123456"), references, max_sentences=4, verbose=0, target_lang=target_lang
    )
    evaluator.set_model(micro_model())
    scores = evaluator.evaluate(step=1)
    assert echo.asked == (["1", "2", "4", "5"], ["de", "de", "fr", "fr"])
    each = {"val_bleu_de": 100.0, "val_chrf_de": 100.0, "val_bleu_fr": 0.0, "val_chrf_fr": 0.0}
    assert scores == pytest.approx({"val_bleu": 50.0, "val_chrf": 50.0, **each})
    entry = evaluator.history[-1]
    assert (entry["val_bleu_de"], entry["val_bleu_fr"]) == pytest.approx((100.0, 0.0))
    with pytest.raises(ValueError, match="2 languages for 6 sources"):
        training.TranslationEvaluator(echo, list("123456"), references, target_lang=["de", "fr"])


@pytest.mark.large  # trains to a result
def test_val_bleu_rises_while_training(tmp_path):
    keras.utils.set_random_seed(1)
    model = tiny_model()
    pairs = training.text_pairs_from_lists(*substitution_corpus(1000, seed=0))
    batches = training.make_batches(
        pairs, number_tokenizer, batch_tokens=1024, max_length=16, seed=0, vocab_size=20
    )
    sources, references = substitution_corpus(40, seed=99)
    translator = Translator(model, NumberTokenizer(), beam_size=1, max_extra_length=2)
    evaluator = training.TranslationEvaluator(
        translator, sources, references, max_sentences=30, verbose=0
    )
    result = train_quietly(
        tmp_path,
        200,
        model,
        batches,
        steps_per_checkpoint=50,
        warmup_steps=100,
        evaluator=evaluator,
        tensorboard=True,
    )
    bleu = [e["val_bleu"] for e in result.evaluations]
    assert [e["step"] for e in result.evaluations] == [50, 100, 150, 200]
    # It rises to its best, then holds: on an AMD EPYC with AVX2 only it
    # reached 60.03 at update 150 and gave 60.02 at 200, where the other
    # CPUs still rose.
    top = bleu.index(max(bleu))
    assert all(b > a for a, b in zip(bleu[:top], bleu[1 : top + 1], strict=True)), bleu
    assert top >= 2 and all(b >= bleu[top] - 0.5 for b in bleu[top:]) and bleu[-1] > 50, bleu
    assert result.history["val_bleu"] == pytest.approx(bleu)
    assert [e["step"] for e in evaluator.history] == [50, 100, 150, 200]
    assert all(e["seconds"] > 0 for e in evaluator.history)
    # The last evaluation is the translator's output scored independently.
    final, _ = evaluator._score(translator.translate(sources[:30]))
    assert final[0] == pytest.approx(bleu[-1])
    # TensorBoard: scalars by update step and example translations.
    tags = set()
    for path in glob.glob(str(tmp_path / "logs" / "evaluation" / "events.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update((v.tag, event.step) for v in event.summary.value)
    assert {("bleu", 50), ("bleu", 200), ("chrf", 100), ("translations", 200)} <= tags


def test_evaluates_the_moving_averages_and_keeps_the_trained_weights():
    model = micro_model()
    optimizer = training.paper_optimizer(model.d_model, ema_momentum=0.5)
    training.compile_for_training(model, optimizer=optimizer)
    optimizer.build(model.trainable_variables)
    trained = [w.numpy() for w in model.trainable_variables]
    averages = training._keras_internals.moving_averages(optimizer)
    for average, value in zip(averages, trained, strict=True):
        average.assign(value + 1.0)
    with averaged_weights_in(model):
        inside = [w.numpy() for w in model.trainable_variables]
    for a, b, c in zip(inside, trained, model.trainable_variables, strict=True):
        np.testing.assert_array_equal(a, b + 1.0)
        np.testing.assert_array_equal(c.numpy(), b)


def test_bad_arguments(tmp_path):
    model = micro_model()
    with pytest.raises(ValueError, match="translator"):
        training.TranslationEvaluator(object(), ["a"], ["b"])
    with pytest.raises(ValueError, match="same length"):
        training.TranslationEvaluator(Echo(["x"]), ["a", "b"], ["b"])
    with pytest.raises(ValueError, match="max_sentences"):
        training.TranslationEvaluator(Echo(["x"]), ["a"], ["b"], max_sentences=0)
    other = Translator(micro_model(), NumberTokenizer())
    with pytest.raises(ValueError, match="wrap the model being trained"):
        training.TranslationEvaluator(other, ["a"], ["b"]).set_model(model)
    evaluator = training.TranslationEvaluator(Echo(["x"]), ["a"], ["b"], every=3)
    with pytest.raises(ValueError, match="evaluator.every"):
        train_quietly(tmp_path, 4, model, steps_per_checkpoint=2, evaluator=evaluator)

"""The runner conformance tests: every translator of the package takes
`Runner`'s calls, and for each method a runner supports, the same
sentences give `Translator`'s outputs (one export per runner of the
trained letter reverser with beam 3, shared with the agreement tests);
each method it does not support raises `NotImplementedError` naming it."""

import importlib.util

import numpy as np
import pytest

from keras_transformer_runtime import CTranslate2Translator
from keras_transformer_runtime import LiteRTTranslator
from keras_transformer_runtime import ONNXTranslator
from keras_transformer_runtime import Runner
from keras_transformer_runtime import SavedModelTranslator
from keras_transformer_runtime.runners import runner as methods
from tests.training.helpers import letter_reversal_corpus

pytestmark = [pytest.mark.tensorflow_only, pytest.mark.large]  # each loads a converted search

RUNNERS = {
    "Translator": (None, None),
    "SavedModelTranslator": (SavedModelTranslator, None),
    "CTranslate2Translator": (CTranslate2Translator, "ctranslate2"),
    "LiteRTTranslator": (LiteRTTranslator, "ai_edge_litert"),
    "ONNXTranslator": (ONNXTranslator, "onnxruntime"),
}
# Empty, one letter, and letter sequences of many lengths.
SOURCES = ["", "a", *letter_reversal_corpus(20, seed=21)[0]]
CONSTRAINTS = [[], ["a"], *(sentence.split()[-1:] for sentence in SOURCES[2:])]
# Documented differences (keras_transformer_runtime.runners.ctranslate2): CTranslate2
# does not decode an empty source (its translation is empty), and its
# n-best lists agree on the best only.
UNDECODED = {"CTranslate2Translator": {""}}
BEST_OF_N_BEST = {"CTranslate2Translator"}


def sources_of(runner):
    """`SOURCES` less those whose difference the runner documents."""
    return [s for s in SOURCES if s not in UNDECODED.get(runner.name, set())]


@pytest.fixture(params=list(RUNNERS))
def runner(request, reverser_translator, reverser_export):
    """Each runner of the reverser (`Translator` itself included), loaded
    once per test."""
    runner_class, needs = RUNNERS[request.param]
    if runner_class is None:
        return reverser_translator
    if needs and importlib.util.find_spec(needs) is None:
        pytest.skip(f"{needs} is an optional extra")
    if request.param == "ONNXTranslator" and importlib.util.find_spec("tf2onnx") is None:
        pytest.skip("tf2onnx is an optional extra")
    return runner_class(reverser_export(request.param))


def test_every_runner_is_a_runner_and_refuses_what_it_does_not_support(runner):
    assert isinstance(runner, Runner)
    assert runner.supports(methods.TRANSLATE)
    assert runner.settings.beam_size == 3
    assert runner.describe()
    calls = {
        methods.TRANSLATE_WITH_SCORES: lambda: runner.translate_with_scores(["a"]),
        methods.SAMPLE: lambda: runner.sample(["a"]),
        methods.SCORE: lambda: runner.score(["a"], ["a"]),
        methods.TRANSLATE_WITH_CONSTRAINTS: lambda: runner.translate_with_constraints(["a"]),
    }
    for method, call in calls.items():
        if not runner.supports(method):
            with pytest.raises(NotImplementedError, match=f"{runner.name} does not support"):
                call()
    with pytest.raises(ValueError, match="`method` must be one of"):
        runner.supports("translate_everything")


def test_best_translations_and_scores_are_the_translators(runner, reverser_translator):
    sources = sources_of(runner)
    expected = [options[0] for options in reverser_translator.translate_with_scores(sources)]
    for batch_size in (1, 7):
        found = runner.translate_with_scores(sources, batch_size=batch_size)
        assert [len(options) for options in found] == [1] * len(sources)
        assert [o[0].translation for o in found] == [h.translation for h in expected]
        np.testing.assert_allclose(
            [o[0].score for o in found], [h.score for h in expected], rtol=1e-5, atol=1e-5
        )
    assert runner.translate(sources) == [h.translation for h in expected]
    # Bytes, as a command line reads lines, are the same sentences.
    assert runner.translate([s.encode() for s in sources[:4]]) == runner.translate(sources[:4])


def test_n_best_and_token_scores_are_the_translators(runner, reverser_translator):
    sources = sources_of(runner)
    try:
        found = runner.translate_with_scores(sources, n_best=3)
    except ValueError as error:  # a search that returns the best only
        assert "n_best=1" in str(error) and runner.max_n_best == 1
    else:
        expected = reverser_translator.translate_with_scores(sources, n_best=3)
        assert all(len(o) == 3 for o in found)
        for options in found:
            assert [h.score for h in options] == sorted((h.score for h in options), reverse=True)
        if runner.name in BEST_OF_N_BEST:
            found, expected = [o[:1] for o in found], [o[:1] for o in expected]
        assert [[h.translation for h in o] for o in found] == [
            [h.translation for h in o] for o in expected
        ]
        np.testing.assert_allclose(
            [[h.score for h in o] for o in found],
            [[h.score for h in o] for o in expected],
            atol=1e-4,
        )
        assert runner.has_token_scores
    if not runner.has_token_scores:  # an export from before its token scores
        with pytest.raises(ValueError, match="token_scores=False"):
            runner.translate_with_scores(sources, token_scores=True)
        return
    scored = [o[0] for o in runner.translate_with_scores(sources, token_scores=True)]
    expected = [o[0] for o in reverser_translator.translate_with_scores(sources, token_scores=True)]
    assert [h.tokens for h in scored] == [h.tokens for h in expected]
    for ours, theirs in zip(scored, expected, strict=True):
        np.testing.assert_allclose(ours.token_scores, theirs.token_scores, atol=1e-4)
        assert ours.log_prob == pytest.approx(sum(ours.token_scores), abs=1e-4)


def test_token_scores_are_what_score_gives_the_same_pieces(runner):
    # Token scores are those of the pieces the search wrote; `score` of the
    # translation's text scores the tokenizer's pieces: where they are the
    # same pieces, the same numbers (docs/serving.md, "Token scores").
    if not (runner.has_token_scores and runner.supports(methods.SCORE)):
        pytest.skip(f"{runner.name} gives no token scores or does not score")
    sources = sources_of(runner)
    best = [o[0] for o in runner.translate_with_scores(sources, token_scores=True)]
    scored = runner.score(sources, [h.translation for h in best])
    same = [(h, s) for h, s in zip(best, scored, strict=True) if s.tokens == h.tokens]
    assert len(same) >= 0.9 * len(best)
    for hypothesis, score in same:
        np.testing.assert_allclose(score.token_scores, hypothesis.token_scores, atol=1e-4)
        assert score.log_prob == pytest.approx(hypothesis.log_prob, abs=1e-4)


def test_scores_of_given_targets_are_the_translators(runner, reverser_translator):
    if not runner.supports(methods.SCORE):
        pytest.skip(f"{runner.name} does not score")
    targets = [s[::-1] for s in SOURCES]  # the right reversal, letter by letter
    targets[2] = "x y z"
    found, expected = runner.score(SOURCES, targets), reverser_translator.score(SOURCES, targets)
    assert [s.tokens for s in found] == [s.tokens for s in expected]
    np.testing.assert_allclose(
        [s.log_prob for s in found], [s.log_prob for s in expected], atol=1e-3
    )
    np.testing.assert_allclose([s.score for s in found], [s.score for s in expected], atol=1e-3)


def test_samples_repeat_with_their_seed(runner):
    if not runner.supports(methods.SAMPLE):
        pytest.skip(f"{runner.name} does not sample")
    drawn = runner.sample(SOURCES, num_samples=2, seed=7, batch_size=5)
    assert [len(options) for options in drawn] == [2] * len(SOURCES)
    assert all(h.score <= 0 for options in drawn for h in options)
    again = runner.sample(SOURCES, num_samples=2, seed=7, batch_size=5)
    translations = [[h.translation for h in options] for options in drawn]
    assert [[h.translation for h in options] for options in again] == translations


def test_constrained_translations_are_the_translators(runner, reverser_translator):
    if not runner.supports(methods.TRANSLATE_WITH_CONSTRAINTS):
        pytest.skip(f"{runner.name} has no terminology constraints")
    banned = [[], [], ["x"], *([] for _ in SOURCES[3:])]
    found = runner.translate_with_constraints(SOURCES, CONSTRAINTS, banned, batch_size=7)
    expected = reverser_translator.translate_with_constraints(SOURCES, CONSTRAINTS, banned)
    assert [h.translation for h in found] == [h.translation for h in expected]
    assert [h.constraints_met for h in found] == [h.constraints_met for h in expected]
    np.testing.assert_allclose([h.score for h in found], [h.score for h in expected], atol=1e-4)
    # Each constraint is in its translation, as a word.
    for h, phrases in zip(found, CONSTRAINTS, strict=True):
        assert h.constraints_met and all(p in h.translation.split() for p in phrases)

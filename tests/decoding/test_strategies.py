"""The strategies as objects: chosen once from the settings, the same
outputs as the functions, and one shape of `outputs` for every kind."""

import numpy as np
import pytest

from keras_transformer.decoding import BeamSearch
from keras_transformer.decoding import ConstrainedBeamSearch
from keras_transformer.decoding import GreedySearch
from keras_transformer.decoding import Sampling
from keras_transformer.decoding import SearchRequest
from keras_transformer.decoding import beam_search
from keras_transformer.decoding import strategies
from keras_transformer.decoding.phrases import right_aligned
from keras_transformer_runtime.runners.settings import DecodingSettings
from tests.decoding.test_search import markov
from tests.decoding.test_search import strip

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({}, BeamSearch(beam_size=4, alpha=0.6)),
        ({"beam_size": 1, "alpha": 0.2}, GreedySearch(alpha=0.2)),
        (
            {"search": "sample", "top_k": 5, "temperature": 0.7},
            Sampling(temperature=0.7, top_k=5, alpha=0.6),
        ),
    ],
)
def test_the_settings_choose_the_strategy_once(changes, expected):
    strategy = strategies.from_settings(DecodingSettings(**changes))
    assert strategy == expected
    assert strategy.draws_at_random == (changes.get("search") == "sample")


def test_n_best_of_a_beam_of_one_needs_a_wider_beam():
    settings = DecodingSettings(beam_size=1)
    assert strategies.beam_from_settings(settings) == GreedySearch(alpha=0.6)
    with pytest.raises(ValueError, match="num_results"):
        strategies.beam_from_settings(settings, num_results=2)


def test_every_strategy_reports_ranked_penalized_outputs():
    """`outputs` has one shape for every kind; a beam of one is greedy
    search, whose penalized score is GNMT's formula over its length."""
    step, cache = markov(3)
    request = SearchRequest(step, cache, 3, 7)
    alpha = 0.6
    greedy_ids, greedy_scores = GreedySearch(alpha=alpha).outputs(request)
    beam_ids, beam_scores = BeamSearch(beam_size=1, alpha=alpha).outputs(request)
    np.testing.assert_array_equal(greedy_ids.numpy(), beam_ids.numpy())
    np.testing.assert_allclose(greedy_scores.numpy(), beam_scores.numpy(), rtol=1e-5)
    _, log_probs = GreedySearch().search(request)
    lengths = np.array([len(strip(row)) for row in greedy_ids.numpy()[:, 0]])
    penalty = ((5 + lengths) / 6) ** alpha
    np.testing.assert_allclose(greedy_scores.numpy()[:, 0], log_probs.numpy() / penalty, rtol=1e-5)
    ids, scores = Sampling(top_k=1, alpha=alpha).outputs(request, seed=3)
    np.testing.assert_array_equal(ids.numpy(), greedy_ids.numpy())
    assert ids.shape[:2] == scores.shape == (3, 1)


def test_the_constrained_strategy_is_what_beam_search_runs_with_constraints():
    step, cache = markov(3)
    phrases = right_aligned([[[4]], [[5, 4]], [[1]]])
    by_function, _ = beam_search(step, cache, 3, 8, beam_size=3, constraints=phrases)
    search = ConstrainedBeamSearch(beam_size=3, constraints=phrases)
    by_object, _ = search.search(SearchRequest(step, cache, 3, 8))
    np.testing.assert_array_equal(by_function.numpy(), by_object.numpy())
    free, _ = BeamSearch(beam_size=3).search(SearchRequest(step, cache, 3, 8))
    assert not np.array_equal(free.numpy(), by_object.numpy())  # the phrases were binding


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: BeamSearch(beam_size=2, num_results=3), "num_results"),
        (lambda: Sampling(temperature=0.0), "temperature"),
        (lambda: Sampling(top_p=1.5), "top_p"),
    ],
)
def test_a_strategy_out_of_range_is_refused_when_made(make, name):
    with pytest.raises(ValueError, match=name):
        make()

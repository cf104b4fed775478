"""`Runner`'s public methods: the batch size a call runs with."""

import pytest

from keras_transformer_runtime.runners import runner
from keras_transformer_runtime.runners.results import Hypothesis
from tests.runtime.serving.reversing import ReversingRunner


class SizeRecordingRunner(ReversingRunner):
    """Records the `batch_size` each method of sentences is given, and
    runs in calls of at most that many sentences; 3 sentences a call in
    bulk."""

    methods = ReversingRunner.methods | {runner.SAMPLE, runner.TRANSLATE_WITH_CONSTRAINTS}
    bulk_batch_size = 3

    def __init__(self):
        super().__init__()
        self.sizes = []

    def _translate_with_scores(self, sentences, n_best, token_scores, batch_size):
        self.sizes.append(batch_size)
        sentences, found = list(sentences), []
        for start in range(0, len(sentences), batch_size):
            chunk = sentences[start : start + batch_size]
            found += super()._translate_with_scores(chunk, n_best, token_scores, batch_size)
        return found

    def _sample(self, sentences, num_samples, seed, batch_size):
        self.sizes.append(batch_size)
        return [[Hypothesis(s[::-1], -1.0)] * num_samples for s in sentences]

    def _translate_with_constraints(self, sentences, constraints, banned, batch_size):
        self.sizes.append(batch_size)
        return [Hypothesis(s[::-1], -1.0, constraints_met=True) for s in sentences]


CALLS = {
    "translate": lambda r, texts, **size: r.translate(texts, **size),
    "translate_with_scores": lambda r, texts, **size: r.translate_with_scores(texts, **size),
    "sample": lambda r, texts, **size: r.sample(texts, seed=1, **size),
    "translate_with_constraints": lambda r, texts, **size: r.translate_with_constraints(
        texts, [[] for _ in texts], **size
    ),
}
TEXTS = ["one", "two", "three", "four", "five", "six", "seven"]


@pytest.mark.parametrize("method", sorted(CALLS))
def test_a_call_without_batch_size_runs_in_the_runners_bulk_batches(method):
    recording = SizeRecordingRunner()
    results = CALLS[method](recording, TEXTS)
    assert len(results) == len(TEXTS)
    assert recording.sizes == [SizeRecordingRunner.bulk_batch_size]
    if method in ("translate", "translate_with_scores"):  # calls of at most 3: 3 + 3 + 1
        assert [len(call) for call in recording.calls] == [3, 3, 1]


@pytest.mark.parametrize("method", sorted(CALLS))
def test_a_given_batch_size_is_used_as_given(method):
    recording = SizeRecordingRunner()
    CALLS[method](recording, TEXTS, batch_size=5)
    assert recording.sizes == [5]


@pytest.mark.parametrize("method", sorted(CALLS))
@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "8"])
def test_a_bad_batch_size_is_refused_before_anything_runs(method, bad):
    recording = SizeRecordingRunner()
    with pytest.raises(ValueError, match="`batch_size` must be a positive integer"):
        CALLS[method](recording, TEXTS, batch_size=bad)
    assert recording.sizes == [] and recording.calls == []


def test_resolve_batch_size_gives_the_bulk_size_for_none():
    recording = SizeRecordingRunner()
    assert recording.resolve_batch_size(None) == 3
    assert recording.resolve_batch_size(40) == 40
    assert runner.Runner.bulk_batch_size == 64  # the kinds without their own

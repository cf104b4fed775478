"""The request limits of a server (`protocol.Limits`): where each comes
from and how a refusal names it (the bodies' checks:
tests/runtime/serving/test_app.py, through the server)."""

import pytest

from keras_transformer_runtime.serving.protocol import BadRequest
from keras_transformer_runtime.serving.protocol import Limits
from tests.runtime.serving.reversing import ReversingRunner


def test_limits_come_from_the_flags_then_the_export_then_the_defaults():
    runner = ReversingRunner()
    limits = Limits.of(runner)
    assert (limits.max_sentences, limits.max_tokens) == (256, 16_384)
    assert limits.names == ("max_request_sentences", "max_request_tokens")
    runner.limits = {"max_batch_size": 32, "max_input_tokens": 1000}  # as a SavedModel records
    limits = Limits.of(runner)
    assert (limits.max_sentences, limits.max_tokens) == (32, 1000)
    assert limits.names == ("max_batch_size", "max_input_tokens")
    limits = Limits.of(runner, max_sentences=8)
    assert (limits.max_sentences, limits.max_tokens) == (8, 1000)
    assert limits.names == ("max_request_sentences", "max_input_tokens")


def test_a_request_over_a_limit_is_refused_naming_it():
    limits = Limits(max_sentences=2, max_tokens=10, names=("max_batch_size", "max_input_tokens"))
    lengths = lambda texts: [len(t) for t in texts]  # noqa: E731
    limits.check(["abcd", "abcd"], lengths)  # 4 + 4 tokens and two EOS: 10
    with pytest.raises(BadRequest, match="at most max_batch_size=2 sentences; this one holds 3"):
        limits.check(["a", "b", "c"], lengths)
    with pytest.raises(BadRequest, match="at most max_input_tokens=10 source tokens; .* 11"):
        limits.check(["abcd", "abcde"], lengths)

"""Web pages and Markdown through every runner of the trained letter
reverser: a runner with the model's alignments puts a tag around the
reversed words it wrapped (the reverser attends to the letter it copies),
one without them by position; either way the page keeps its markup."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from keras_transformer_runtime import ONNXTranslator
from keras_transformer_runtime.runners import runner as methods
from tests.export.test_runners import runner  # noqa: F401 (the fixture)
from tests.export.test_runners import sources_of

pytestmark = [pytest.mark.tensorflow_only, pytest.mark.large]


def test_alignments_are_the_translators(runner, reverser_translator):  # noqa: F811
    if not runner.supports(methods.TRANSLATE_WITH_ALIGNMENTS):
        with pytest.raises(NotImplementedError, match="translate_with_alignments"):
            runner.translate_with_alignments(["a"])
        return
    sources = sources_of(runner)
    found = runner.translate_with_alignments(sources, batch_size=7)
    expected = reverser_translator.translate(sources, return_alignments=True)
    assert [a.translation for a in found] == [a.translation for a in expected]
    assert [a.target_tokens for a in found] == [a.target_tokens for a in expected]
    assert [a.source_tokens for a in found] == [a.source_tokens for a in expected]
    pairs = [
        (ours, theirs)
        for a, b in zip(found, expected, strict=True)
        for ours, theirs in zip(a.alignments, b.alignments, strict=True)
    ]
    # The same argmax, but where two source pieces are within rounding.
    assert sum(ours == theirs for ours, theirs in pairs) >= 0.95 * len(pairs)
    # The whole attention, row by row (CTranslate2's EOS column is what its
    # row lacks of 1), the same within float32 rounding.
    for a, b in zip(found, expected, strict=True):
        assert len(a.attention) == len(b.attention) == len(a.target_tokens)
        np.testing.assert_allclose(np.array(a.attention), np.array(b.attention), atol=1e-3)


@pytest.mark.parametrize(
    "page, aligned, by_position, format",
    [
        (
            "<p><b>a b</b> c d</p>",
            "<p>d c <b>b a</b></p>",
            "<p><b>d c</b> b a</p>",
            "html",
        ),
        (
            "- c *d e*\n- f `x` g\n",
            # The code after the word aligned to "f", spaced as it was.
            "- *e d* c\n- g f `x` \n",
            "- e *d c*\n- g `x` f\n",
            "markdown",
        ),
    ],
)
def test_markup_goes_around_the_reversed_words(runner, page, aligned, by_position, format):  # noqa: F811
    expected = aligned if runner.supports(methods.TRANSLATE_WITH_ALIGNMENTS) else by_position
    assert runner.translate([page], format=format) == [expected]
    assert runner.translate_documents([page, page], format)[1].translation == expected


def test_an_export_from_before_its_alignments_places_markup_by_position(reverser_export, tmp_path):
    """An ONNX export whose record lists `ids` and `scores` only (written
    before the search returned its attention) translates as before, gives
    no token scores, and places markup by position."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tf2onnx")
    fresh = Path(reverser_export("ONNXTranslator"))
    for file in fresh.parent.iterdir():
        shutil.copy(file, tmp_path / file.name)
    record_path = tmp_path / (fresh.name + ".json")
    record = json.loads(record_path.read_text())
    assert {"attention", "token_scores"} <= set(record["signature"]["outputs"])
    record["signature"]["outputs"] = {
        name: record["signature"]["outputs"][name] for name in ("ids", "scores")
    }
    record_path.write_text(json.dumps(record))
    old, new = ONNXTranslator(tmp_path / fresh.name), ONNXTranslator(fresh)
    assert new.supports(methods.TRANSLATE_WITH_ALIGNMENTS) and new.has_token_scores
    assert not old.supports(methods.TRANSLATE_WITH_ALIGNMENTS) and not old.has_token_scores
    sources = ["a b c", "d e"]
    assert old.translate(sources) == new.translate(sources)
    with pytest.raises(ValueError, match="token_scores=False"):
        old.translate_with_scores(sources, token_scores=True)
    assert old.translate(["<p><b>a b</b> c d</p>"], format="html") == ["<p><b>d c</b> b a</p>"]

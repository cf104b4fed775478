"""Web pages and Markdown through a runner: the markup put back by the
runner's alignments (or by position without them), against outputs worked
out by hand for a runner that reverses the order of the words."""

import dataclasses
import warnings

import pytest

from keras_transformer_runtime.runners import runner
from keras_transformer_runtime.runners.results import AlignedTranslation
from keras_transformer_runtime.runners.results import Hypothesis
from keras_transformer_runtime.runners.settings import DecodingSettings
from keras_transformer_runtime.text.formats import RepairedMarkupWarning


class WordReversingRunner(runner.Runner):
    """Translates by writing the words in reverse order, upper-cased; its
    alignments say so (the i-th of n target words is the n-1-i-th source
    word). Records the texts of each call (`calls`), and of each call for
    alignments (`aligned_calls`)."""

    methods = frozenset(
        {runner.TRANSLATE, runner.TRANSLATE_WITH_SCORES, runner.TRANSLATE_WITH_ALIGNMENTS}
    )

    def __init__(self):
        self.settings = DecodingSettings(split_sentences=False)
        self.calls, self.aligned_calls = [], []

    def _source_lengths(self, texts):
        return [len(text.split()) for text in texts]

    def _translate_with_scores(self, sentences, n_best, token_scores, batch_size):
        self.calls.append(list(sentences))
        return [[Hypothesis(" ".join(s.split()[::-1]).upper(), -1.0)] for s in sentences]

    def _translate_with_alignments(self, sentences, batch_size):
        self.calls.append(list(sentences))
        self.aligned_calls.append(list(sentences))
        found = []
        for sentence in sentences:
            words = sentence.split()
            found.append(
                AlignedTranslation(
                    translation=" ".join(words[::-1]).upper(),
                    target_tokens=["▁" + w.upper() for w in words[::-1]] + ["</s>"],
                    source_tokens=["▁" + w for w in words] + ["</s>"],
                    alignments=[len(words) - 1 - i for i in range(len(words))] + [len(words)],
                )
            )
        return found


class PositionalRunner(WordReversingRunner):
    """The same translations, without alignments."""

    methods = frozenset({runner.TRANSLATE, runner.TRANSLATE_WITH_SCORES})


def test_html_tags_go_around_the_words_aligned_to_those_they_wrapped():
    translator = WordReversingRunner()
    pages = ["<p><b>a b</b> c d</p>", '<ul><li><a href="x?a=1&amp;b=2">e</a> f<br>g</li></ul>']
    assert translator.translate(pages, format="html") == [
        "<p>D C <b>B A</b></p>",
        # Markup side by side follows its words: the line break after the
        # word it was written after ("f"), the link around its word.
        '<ul><li>G F<br> <a href="x?a=1&amp;b=2">E</a></li></ul>',
    ]
    # Every segment of every page in one call.
    assert translator.calls == [["a b c d", "e f\ng"]]


def test_segments_without_inline_markup_are_translated_without_alignments():
    translator = WordReversingRunner()
    pages = ["<p>a <b>b</b></p><p>c d</p><ul><li>e</li><li>f <i>g</i></li></ul>", "<p>h i</p>"]
    assert translator.translate(pages, format="html") == [
        "<p><b>B</b> A</p><p>D C</p><ul><li>E</li><li><i>G</i> F</li></ul>",
        "<p>I H</p>",
    ]
    # One call for alignments (the segments with markup), one plain call.
    assert translator.aligned_calls == [["a b", "f g"]]
    assert translator.calls == [["a b", "f g"], ["c d", "e", "h i"]]


def test_without_alignments_markup_is_placed_by_position():
    assert PositionalRunner().translate(["<p><b>a b</b> c d</p>"], format="html") == [
        "<p><b>D C</b> B A</p>"
    ]


def test_markdown_keeps_emphasis_links_and_code_blocks():
    document = "# a **b c**\n\n[d](http://x.org) e\n\n    code stays\n"
    assert WordReversingRunner().translate([document], format="markdown") == [
        "# **C B** A\n\nE [D](http://x.org)\n\n    code stays\n"
    ]


def test_text_is_translated_as_it_is_and_markup_in_it_as_words():
    translator = WordReversingRunner()
    assert translator.translate(["a <b>b</b>"]) == ["<B>B</B> A"]
    assert translator.translate_documents(["a b"])[0].translation == "B A"


def test_a_repaired_page_says_so_and_keeps_its_text():
    translator = WordReversingRunner()
    with pytest.warns(RepairedMarkupWarning, match=r"inputs \[1\]"):
        found = translator.translate(["<p>a</p>", "<b><i>a</b> b</i>"], format="html")
    assert found[0] == "<p>A</p>"
    assert "A" in found[1] and "B" in found[1]
    documents = translator.translate_documents(["<p>a</p>", "<b>a"], "html")
    assert [d.repaired for d in documents] == [False, True]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        translator.translate(["<p>a</p>"], format="html")


def test_a_page_without_words_is_not_sent_to_the_model():
    translator = WordReversingRunner()
    assert translator.translate(["<p> </p><pre>a b</pre>"], format="html") == [
        "<p> </p><pre>a b</pre>"
    ]
    assert translator.calls == []


def test_an_unknown_format_is_refused_naming_the_accepted_ones():
    with pytest.raises(ValueError, match=r"`format` must be one of 'text', 'html', 'markdown'"):
        WordReversingRunner().translate(["a"], format="xml")


class HubAttendingRunner(WordReversingRunner):
    """The same translations, with attention where every target word
    attends most to the first source word (a "hub", so every argmax points
    there) and next most to the word it translates: only matching on the
    whole attention finds the reversal. Sentences are split."""

    def __init__(self):
        super().__init__()
        self.settings = DecodingSettings()

    def _translate_with_alignments(self, sentences, batch_size):
        found = super()._translate_with_alignments(sentences, batch_size)
        with_attention = []
        for aligned in found:
            words = len(aligned.source_tokens) - 1
            rows = []
            for i in range(words):
                row = [0.0] * (words + 1)
                row[0], row[words - 1 - i], row[words] = 0.5, row[words - 1 - i] + 0.4, 0.1
                rows.append(row)
            rows.append([0.0] * words + [1.0])  # EOS on EOS
            hub = [0] * words + [words]
            with_attention.append(
                AlignedTranslation(
                    aligned.translation,
                    aligned.target_tokens,
                    aligned.source_tokens,
                    alignments=hub,
                    attention=rows,
                )
            )
        return with_attention


def test_tags_are_placed_by_the_whole_attention_where_runners_give_it():
    translator = HubAttendingRunner()
    # Two sentences, translated apart and joined (their attention block by
    # block), then one sentence whose two phrases swap places.
    pages = [
        "<p><b>Aa bb</b> cc dd. <i>Ee</i> ff gg.</p>",
        "<p><b>Aa bb</b> cc dd <i>Ee</i> ff gg.</p>",
    ]
    assert translator.translate(pages, format="html") == [
        "<p>DD. CC <b>BB AA</b> GG. FF <i>EE</i></p>",
        "<p>GG. FF <i>EE</i> DD CC <b>BB AA</b></p>",
    ]
    assert translator.calls == [["Aa bb cc dd.", "Ee ff gg.", "Aa bb cc dd Ee ff gg."]]


def test_with_the_argmax_alone_a_hub_takes_every_tag():
    # The same runner's alignments without its attention: every word
    # aligned to the first source word.
    class HubOnlyRunner(HubAttendingRunner):
        def _translate_with_alignments(self, sentences, batch_size):
            found = super()._translate_with_alignments(sentences, batch_size)
            return [dataclasses.replace(aligned, attention=[]) for aligned in found]

    assert HubOnlyRunner().translate(["<p><b>Aa bb</b> cc dd.</p>"], format="html") == [
        "<p><b>DD. CC BB AA</b></p>"
    ]

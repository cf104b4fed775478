"""Inline markup put back by alignment (`text.markup`), and web pages
through it (`text.html`): the tags kept, well-formed, around the words
aligned to those they wrapped, and no text lost, checked on generated
pages against Python's own HTML tokenizer."""

import html
import html.parser
import random

import pytest

from keras_transformer_runtime.text.markup import Span
from keras_transformer_runtime.text.markup import TaggedText
from keras_transformer_runtime.text.markup import TranslatedText
from keras_transformer_runtime.text.markup import Void
from keras_transformer_runtime.text.words import WORD

pytest.importorskip("selectolax")  # the [markup] extra

from keras_transformer_runtime.text.html import HtmlPage  # noqa: E402

VOIDS = ("br", "img", "wbr")


class Tags(html.parser.HTMLParser):
    """Python's HTML tokenizer: the start tags with their attributes, the
    text, and whether every element closes in the order it opened."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.starts, self.text, self.comments, self.stack, self.nested = [], [], [], [], True
        self.feed(text)
        self.close()
        self.nested = self.nested and not self.stack

    def handle_starttag(self, tag, attrs):
        self.starts.append((tag, tuple(attrs)))
        if tag not in VOIDS:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):  # <img ... />: no end of its own
        self.starts.append((tag, tuple(attrs)))

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.nested = False

    def handle_data(self, data):
        self.text.append(data)

    def handle_comment(self, data):
        self.comments.append(data)


def test_a_span_goes_around_the_words_aligned_to_those_it_wrapped():
    tagged = TaggedText(
        "A little girl climbs into a wooden playhouse.",
        (Span(2, 13, "<b>", "</b>"), Span(28, 44, '<a href="x.html">', "</a>")),
    )
    german = "Ein kleines Mädchen klettert in ein Holzhaus."
    assert tagged.placed(german, [0, 1, 2, 3, 4, 5, 7, 8]) == (
        'Ein <b>kleines Mädchen</b> klettert in ein <a href="x.html">Holzhaus</a>.'
    )
    # Reordered: the span follows its words; nested spans stay nested.
    nested = TaggedText("a b c", (Span(0, 5, "<b>", "</b>", (Span(2, 3, "<i>", "</i>"),)),))
    assert nested.placed("c b a", [2, 1, 0]) == "<b>c <i>b</i> a</b>"
    # No aligned word: the tags stay, empty, after the word aligned to the
    # last source word before them ("A", for both).
    assert tagged.placed("Kinder spielen.", [0, None, 8]) == (
        'Kinder <b></b><a href="x.html"></a>spielen.'
    )


def test_a_span_goes_around_a_word_with_combining_marks():
    # "हिन्दी" is one word (text/words.py), not six.
    tagged = TaggedText("I speak Hindi.", (Span(8, 13, "<b>", "</b>"),))
    assert tagged.placed("मैं हिन्दी बोलता हूँ.", [0, 2, 1, 1, 3]) == "मैं <b>हिन्दी</b> बोलता हूँ."


def test_spans_side_by_side_follow_their_words_when_the_translation_swaps_them():
    # "a red car and a blue bike" -> "ein blaues Rad und ein rotes Auto":
    # the phrases swap, and so do their tags (in source order, the second
    # span would have to follow the first and wrap nothing).
    tagged = TaggedText(
        "a red car and a blue bike",
        (Span(2, 9, "<b>", "</b>"), Span(16, 25, "<i>", "</i>")),
    )
    german = "ein blaues Rad und ein rotes Auto"
    assert tagged.placed(german, [4, 5, 6, 3, 0, 1, 2]) == (
        "ein <i>blaues Rad</i> und ein <b>rotes Auto</b>"
    )
    # A void between them goes after the word aligned to the one before it.
    with_break = TaggedText("a b<br> c", (Span(0, 1, "<b>", "</b>"), Void(3, "<br>")))
    assert with_break.placed("C B A", [2, 1, 0]) == "C B<br> <b>A</b>"


def test_voids_keep_their_side_of_the_whitespace():
    tagged = TaggedText("one two  three", (Void(3, "<br>"), Void(8, "<img>")))
    assert tagged.placed("eins zwei drei", [0, 1, 2]) == "eins<br> zwei <img> drei"


def test_markup_out_of_its_place_is_refused():
    with pytest.raises(ValueError, match="after the markup before it"):
        TaggedText("a b c", (Span(0, 3, "<b>", "</b>"), Span(2, 5, "<i>", "</i>")))
    with pytest.raises(ValueError, match="within its text or span"):
        TaggedText("a", (Span(0, 3, "<b>", "</b>"),))
    with pytest.raises(ValueError, match="within its text or span"):
        TaggedText("a b", (Span(0, 1, "<b>", "</b>", (Void(2, "<br>"),)),))
    with pytest.raises(ValueError, match="one source word per target word"):
        TaggedText("a b").placed("x y", [0])


def random_attributes(rng):
    values = ["x.html", 'say "hi"', "it's", "a &amp; b", "&lt;tag&gt;", "é"]
    attributes = []
    for name in rng.sample(["href", "title", "class", "data-x"], rng.randint(0, 2)):
        value = rng.choice(values)
        quote = "'" if '"' in value else '"'
        attributes.append(f" {name}={quote}{value}{quote}")
    return "".join(attributes)


def random_inline(rng, depth, in_link=False):
    """Well-formed inline HTML: words, nested inline tags with attributes
    and entities, voids, comments (never a link in a link, which HTML
    forbids and a browser repairs)."""
    parts = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        if kind < 0.45 or depth > 2:
            words = rng.sample(["cat", "dog", "red", "runs", "&amp;", "blue", "fast", "Tom's"], 2)
            parts.append(" ".join(words))
        elif kind < 0.8:
            tags = ["b", "i", "em", "strong", "span", "u", "sub", "sup"] + ["a"] * (not in_link)
            tag = rng.choice(tags)
            inner = random_inline(rng, depth + 1, in_link or tag == "a")
            parts.append(f"<{tag}{random_attributes(rng)}>{inner}</{tag}>")
        elif kind < 0.92:
            parts.append(rng.choice(["<br>", '<img src="p.png" alt="a &quot;b&quot;">', "<wbr>"]))
        else:
            parts.append(f"<!-- note {rng.randint(0, 9)} -->")
    return rng.choice([" ", ""]).join(parts) if depth else " ".join(parts)


def random_page(rng):
    blocks = []
    for _ in range(rng.randint(1, 3)):
        block = rng.choice(["p", "li", "h2", "div", "blockquote"])
        blocks.append(f"<{block}>{random_inline(rng, 0)}.</{block}>")
    if rng.random() < 0.3:
        blocks.append("<script>if (a < b && c) { x = '<b>'; }</script>")
    if rng.random() < 0.2:
        blocks.append('<p translate="no">Keep <b>this</b> as it is.</p>')
    return "".join(blocks)


def translated(segment, rng):
    """A "translation" of a segment: its words shuffled and upper-cased,
    each aligned to the word it came from, or to none."""
    words = WORD.findall(segment.text)
    order = list(range(len(words)))
    rng.shuffle(order)
    alignment = [i if rng.random() < 0.8 else None for i in order]
    return TranslatedText(" ".join(words[i].upper() for i in order), alignment)


def test_on_1000_generated_pages_every_tag_is_kept_well_formed_and_no_text_is_lost():
    rng = random.Random(0)
    repaired = 0
    for _ in range(1000):
        source = random_page(rng)
        page = HtmlPage.parse(source)
        repaired += page.repaired
        translations = [translated(segment, rng) for segment in page.segments]
        output = page.render(translations)
        before, after = Tags(source), Tags(output)
        assert after.nested, output
        # The same elements, each with its attributes' values.
        normalized = sorted((tag, tuple(sorted(a))) for tag, a in before.starts)
        assert sorted((tag, tuple(sorted(a))) for tag, a in after.starts) == normalized
        assert sorted(after.comments) == sorted(before.comments)  # placed by alignment
        # Every word of every translation, in order; the kept text as it was.
        text = "".join(after.text)
        expected = [w for t in translations for w in WORD.findall(t.translation)]
        position = 0
        for word in expected:
            position = text.index(word, position) + len(word)
        assert "if (a < b && c) { x = '<b>'; }" in text or "if (a" not in source
        assert "Keep this as it is." in text or "Keep" not in source
    assert repaired == 0  # well-formed pages need no repair


def test_a_malformed_page_is_repaired_as_a_browser_does_and_says_so():
    page = HtmlPage.parse("<p>A <b>little <i>girl</b> climbs</i> home")
    assert page.repaired
    output = page.render(
        [TranslatedText(s.text, list(range(len(s.source_words())))) for s in page.segments]
    )
    assert Tags(output).nested
    # As a browser builds it (the <i> reopened after </b>), the space
    # outside the tags.
    assert output == "<p>A <b>little <i>girl</i></b> <i>climbs</i> home</p>"
    assert not HtmlPage.parse("<p>Fine <b>page</b>.</p>").repaired


def test_an_entity_and_a_link_survive_translation():
    page = HtmlPage.parse('Two men play <i>soccer</i> &amp; <a href="a?b=1&amp;c=2">laugh</a>.')
    (segment,) = page.segments
    assert segment.text == "Two men play soccer & laugh."
    german = TranslatedText("Zwei Männer spielen Fußball & lachen.", [0, 1, 2, 3, 4, 5, 6])
    assert page.render([german]) == (
        'Zwei Männer spielen <i>Fußball</i> &amp; <a href="a?b=1&amp;c=2">lachen</a>.'
    )
    assert html.unescape(page.render([german])).count("&") == 2


def random_markdown_inline(rng, depth=0, in_link=False):
    parts = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        if kind < 0.5 or depth > 1:
            parts.append(" ".join(rng.sample(["cat", "dog", "red", "runs", "blue", "fast"], 2)))
        elif kind < 0.65:
            parts.append(f"*{random_markdown_inline(rng, depth + 1, in_link)}*")
        elif kind < 0.8:
            parts.append(f"**{random_markdown_inline(rng, depth + 1, in_link)}**")
        elif kind < 0.9 and not in_link:
            inner = random_markdown_inline(rng, depth + 1, True)
            parts.append(f'[{inner}](http://a.b/{rng.randint(0, 9)}?q=1&r=2 "a title")')
        else:
            parts.append(rng.choice(["`x = *1*`", '![a dog](d.png "t")', "<br>"]))
    return " ".join(parts)


def random_markdown(rng):
    blocks = []
    for _ in range(rng.randint(1, 4)):
        prefix = rng.choice(["", "# ", "## ", "- ", "1. ", "> "])
        blocks.append(prefix + random_markdown_inline(rng) + ".")
    if rng.random() < 0.3:
        blocks.append("```\nkeep *this* as [it](is)\n```")
    return "\n\n".join(blocks) + "\n"


def test_on_300_generated_markdown_documents_every_element_is_kept_and_no_text_is_lost():
    """Translations with the words shuffled, some unaligned: where the new
    order would bring emphasis delimiters together (`*a* *b*` placed as
    `**b a*`), the emphasis is written as inline HTML; the HTML that
    CommonMark makes of the output holds the source's elements."""
    from markdown_it import MarkdownIt

    from keras_transformer_runtime.text.markdown import MarkdownPage

    to_html = MarkdownIt("commonmark").render
    rng = random.Random(1)
    for _ in range(300):
        source = random_markdown(rng)
        page = MarkdownPage.parse(source)
        # Word for word, the document renders as it did (whitespace, which
        # HTML collapses, aside).
        assert to_html(page.untranslated()).split() == to_html(source).split(), source
        translations = [translated(segment, rng) for segment in page.segments]
        output = page.render(translations)
        before, after = Tags(to_html(source)), Tags(to_html(output))
        assert after.nested, output
        assert sorted(after.starts) == sorted(before.starts), (source, output)
        text = "".join(after.text)
        position = 0
        for word in [w for t in translations for w in WORD.findall(t.translation)]:
            position = text.index(word, position) + len(word)
        assert "keep *this* as [it](is)" in text or "```" not in source

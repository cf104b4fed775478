"""Inline markup through translation: a segment's text without its tags,
and the tags put back around the target words aligned to the source words
they wrapped (as Bergamot, Firefox's translation engine, does).

A `TaggedText` is what a parser of HTML or Markdown makes of one segment
(a paragraph, a list item, a heading): the `text` to translate, the inline
elements as `Span`s of its characters (`<b>`, `<a href="...">`, `*...*`),
and the markup that wraps nothing (`<br>`, `<img>`, a comment) as `Void`s at
a character offset. `placed(translation, alignment)` puts them into the
translation:

- a span goes around the first to the last target word aligned to one of
  the source words it wrapped (a word is a run of letters and digits, or
  one mark of punctuation: `WORD`);
- a span inside another stays inside it, and spans side by side in the
  source stay side by side, in the order of their words in the target
  (a translation that swaps two phrases swaps their tags): the output is
  always well-formed, whatever the alignment;
- a span whose words have no aligned target word, and a void, go after
  the target word aligned to the source word before them (at the start if
  none);
- every character of the translation is kept, in order; a closing tag
  goes before the whitespace after its last word, an opening tag after the
  whitespace before its first, and a void on the side of the word it was
  written against (with whitespace on both sides, it keeps whitespace on
  both sides).

Example:

>>> tagged = TaggedText("A little girl climbs", (Span(2, 13, "<b>", "</b>"),))
>>> tagged.placed("Ein kleines Mädchen klettert", [0, 1, 2, 3])
'Ein <b>kleines Mädchen</b> klettert'
"""

import dataclasses

from keras_transformer_runtime.text.words import WORD


@dataclasses.dataclass(frozen=True)
class Span:
    """An inline element around the characters `[start, end)` of a
    segment's text: its `opening` and `closing` markup as written, and the
    spans and voids `inner` to it, in document order."""

    start: int
    end: int
    opening: str
    closing: str
    inner: tuple = ()


@dataclasses.dataclass(frozen=True)
class Void:
    """Markup that wraps no text (`<br>`, `<img ...>`, a comment), at the
    character `offset` of a segment's text."""

    offset: int
    markup: str


@dataclasses.dataclass(frozen=True)
class TaggedText:
    """One segment: its `text` to translate, and its markup: the spans
    and voids at its top level, in document order (each span holding its
    own).

    Raises:
        ValueError: markup outside the text or its span, or out of order.
    """

    text: str
    markup: tuple = ()

    def __post_init__(self):
        _check_order(self.markup, 0, len(self.text))

    def _side(self, offset):
        """Where a void at `offset` goes around the whitespace between two
        target words: `"before"` it (written against the word before),
        `"after"` it (against the next), or `"apart"` (whitespace on both
        sides)."""
        if offset > 0 and not self.text[offset - 1].isspace():
            return "before"
        if offset < len(self.text) and self.text[offset].isspace():
            return "apart"
        return "after"

    def source_words(self):
        """The `(start, end)` characters of each word of `text` (`WORD`)."""
        return [match.span() for match in WORD.finditer(self.text)]

    def placed(self, translation, alignment, escape=str, empty_spans=True):
        """`translation` with this segment's markup put back.

        Args:
            translation: the target text; its words are `WORD`'s.
            alignment: for each target word, the index of the source word
                (`source_words`) it is aligned to, or `None`.
            escape: what the translation's text becomes in the markup
                (`html.escape` for HTML), applied after its words are found.
            empty_spans: whether a span without aligned words may wrap
                nothing (HTML: `<b></b>` is an element); if not, it wraps
                the word after its place, or the one before (Markdown:
                `****` is no emphasis).

        Returns:
            The translation with the spans and voids in place.

        Raises:
            ValueError: an alignment of another length than the
                translation's words.
        """
        matches = list(WORD.finditer(translation))
        words = [escape(match.group()) for match in matches]
        if len(alignment) != len(words):
            raise ValueError(
                f"`alignment` must give one source word per target word ({len(words)}). "
                f"Received: alignment={list(alignment)!r}"
            )
        placer = _Placer(self.source_words(), alignment, empty_spans)
        root = _Node(None, 0, len(words))
        self._place(self.markup, root, placer)
        pieces = []
        root.render(words, pieces)
        # What is between the words: the translation's own characters.
        ends = [0] + [match.end() for match in matches]
        starts = [match.start() for match in matches] + [len(translation)]
        between = [escape(translation[end:start]) for end, start in zip(ends, starts, strict=True)]
        return _joined(pieces, between)

    def _place(self, markup, parent, placer):
        """Places `markup` within `parent`'s boundaries in the order of
        the target words it wants (the source's order on a tie: a
        translation that reorders two phrases reorders their markup), each
        after the one before it."""
        wanted = [placer.wanted(item) for item in markup]
        # What wraps nothing goes before a span that starts at its place.
        order = sorted(range(len(markup)), key=lambda index: wanted[index][:2])
        for rank, index in enumerate(order):
            item = markup[index]
            floor = parent.children[-1].high if parent.children else parent.low
            if isinstance(item, Span):
                # Room for the next sibling's first word, if it wants one.
                later = order[rank + 1 :]
                after = min((wanted[i][0] for i in later), default=parent.high)
                low, high = placer.interval(wanted[index], floor, parent.high, after)
                node = _Node(item, low, high)
                parent.children.append(node)
                self._place(item.inner, node, placer)
            else:
                boundary = min(max(wanted[index][0], floor), parent.high)
                parent.children.append(_Placed(item.markup, self._side(item.offset), boundary))


@dataclasses.dataclass(frozen=True)
class TranslatedText:
    """A segment's translation, and for each of its words (`WORD`) the
    index of the source word it is aligned to (or `None`)."""

    translation: str
    alignment: list


@dataclasses.dataclass
class Page:
    """A document in a markup language, parsed (`HtmlPage.parse`,
    `MarkdownPage.parse`): its `segments` to translate, in order, and the
    markup between them. Each kind writes text its own way (`escape`).

    Attributes:
        segments: the `TaggedText`s, in document order.
        parts: the document in order: markup as written (a `str`), or the
            index of a segment.
        repaired: whether the parser had to repair the markup.
    """

    segments: list
    parts: list
    repaired: bool = False

    # Whether a span may wrap no word (see `TaggedText.placed`).
    empty_spans = True
    # The module of the parser (an optional extra) this kind needs.
    parser_module = None

    @classmethod
    def as_html(cls, text):
        """A document of this kind as HTML, for showing it."""
        raise NotImplementedError

    def escape(self, text):
        """`text` as the markup language writes it."""
        return text

    def render(self, translations):
        """The document with each segment replaced by its translation.

        Args:
            translations: a `TranslatedText` for each segment, in order.
        """
        if len(translations) != len(self.segments):
            raise ValueError(
                f"`translations` must hold one per segment ({len(self.segments)}). "
                f"Received: {len(translations)} translations"
            )
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            segment = self.segments[part]
            lead, trail = self.edges(segment)
            placed = self.placed(segment, translations[part])
            out.append(self.escape(lead) + placed + self.escape(trail))
        return "".join(out)

    def edges(self, segment):
        """The whitespace kept around a segment's translation: its text's
        own, before and after."""
        text = segment.text
        return text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]

    def placed(self, segment, translated):
        """The markup of one segment's translation (`TaggedText.placed`)."""
        return segment.placed(
            translated.translation, translated.alignment, self.escape, self.empty_spans
        )

    def untranslated(self):
        """The document with every segment as it was: each its own
        translation, word for word."""
        return self.render(
            [
                TranslatedText(s.text.strip(), list(range(len(s.source_words()))))
                for s in self.segments
            ]
        )


def _check_order(markup, low, high):
    for item in markup:
        start, end = (item.start, item.end) if isinstance(item, Span) else (item.offset,) * 2
        if not low <= start <= end <= high:
            raise ValueError(
                f"Markup must lie within its text or span ({low} to {high}), after the markup "
                f"before it. Received: {item!r}"
            )
        if isinstance(item, Span):
            _check_order(item.inner, start, end)
        low = end


@dataclasses.dataclass
class _Placed:
    """A void placed at a word boundary of the target, on its `side` of
    the whitespace there."""

    markup: str
    side: str
    high: int  # its boundary (where the next sibling may start)


@dataclasses.dataclass
class _Node:
    """A span placed at the word boundaries `[low, high)` of the target,
    with its placed spans and voids."""

    span: Span | None
    low: int
    high: int
    children: list = dataclasses.field(default_factory=list)

    def render(self, words, pieces):
        """Appends this node's pieces: `("word", text)`, or `("markup",
        (markup, its side of the whitespace before the next word))`."""
        if self.span is not None:
            pieces.append(("markup", (self.span.opening, "after")))
        position = self.low
        for child in self.children:
            low = child.low if isinstance(child, _Node) else child.high
            pieces.extend(("word", words[i]) for i in range(position, low))
            position = max(position, low)
            if isinstance(child, _Node):
                child.render(words, pieces)
                position = child.high
            else:
                pieces.append(("markup", (child.markup, child.side)))
        pieces.extend(("word", words[i]) for i in range(position, self.high))
        if self.span is not None:
            pieces.append(("markup", (self.span.closing, "before")))


class _Placer:
    """Where spans and voids go in the target, from the word alignment."""

    def __init__(self, sources, alignment, empty_spans):
        self.sources, self.empty_spans = sources, empty_spans
        self.aligned = {}  # source word -> target words
        for target, source in enumerate(alignment):
            if source is not None:
                self.aligned.setdefault(source, []).append(target)

    def boundary_after(self, offset):
        """The target boundary after the last word aligned to the last
        source word with aligned words that ends at or before `offset` (0
        if none)."""
        for source in range(len(self.sources) - 1, -1, -1):
            if self.sources[source][1] <= offset and source in self.aligned:
                return max(self.aligned[source]) + 1
        return 0

    def wanted(self, item):
        """The boundaries `(low, high)` an item would have on its own (a
        span's around its aligned target words, else empty where a void
        would go; a void's at its place), and whether it wraps words."""
        if isinstance(item, Void):
            boundary = self.boundary_after(item.offset)
            return boundary, boundary, False
        words = [
            source
            for source, (start, end) in enumerate(self.sources)
            if start < item.end and end > item.start
        ]
        covered = [target for source in words for target in self.aligned.get(source, ())]
        if covered:
            return min(covered), max(covered) + 1, True
        boundary = self.boundary_after(item.start)
        return boundary, boundary, bool(words)

    def interval(self, wanted, floor, ceiling, after):
        """A span's boundaries `[low, high)`: what it `wanted`, clamped to
        `[floor, ceiling]` (after its earlier siblings, within its
        parent), and ending by `after` (where a later sibling wants to
        start) when it keeps a word."""
        low = min(max(wanted[0], floor), ceiling)
        high = min(max(wanted[1], low), ceiling)
        if low < after < high:
            high = after
        if low == high and not self.empty_spans and wanted[2]:
            if high < ceiling:
                high += 1
            elif low > floor:
                low -= 1
        return low, high


def _joined(pieces, between):
    """The pieces as text, with `between[i]`, what the translation has
    before its word `i` (and after its last, at the end): the markup
    between two words in order, each on its side of that whitespace."""
    out, pending, word = [], [], 0

    def flush():
        whitespace, opened = between[word], not out
        for markup, side in pending:
            if side == "apart":  # whitespace on both sides, unless just opened
                out.append(whitespace[:1] or ("" if opened else " "))
                whitespace = whitespace[1:] or " "
            elif side == "after":
                out.append(whitespace)
                whitespace = ""
            out.append(markup)
            opened = side == "after"
        out.append(whitespace)

    for kind, value in pieces:
        if kind == "word":
            flush()
            out.append(value)
            pending, word = [], word + 1
        else:
            pending.append(value)
    flush()
    return "".join(out)

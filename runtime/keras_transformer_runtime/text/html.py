"""Web pages through a translator: the page parsed as browsers parse it,
each block's text translated as one segment, its inline tags put back
around the words aligned to those they wrapped (`markup.TaggedText`).

The parser is Lexbor's, through selectolax: a maintained implementation of
the WHATWG HTML5 parsing algorithm, so a malformed page is repaired exactly
as a browser repairs it (a misnested `<b><i></b></i>`, an unclosed `<p>`),
in C, about 30 times faster than html5lib. The repair is reported
(`HtmlPage.repaired`), never silent.

- Block elements (`p`, `li`, `td`, `h1`, `div`, ...) are segments of their
  own: each run of text and inline elements between their block children
  is one `TaggedText`.
- Inline elements (`INLINE`: `b`, `i`, `em`, `strong`, `a`, `span`, `u`,
  `sub`, `sup`, ...) become spans, nested as in the source; void elements
  (`br`, `img`, ...) and comments stay at their aligned position.
- What is not to be translated comes back as it was: `script`, `style`,
  `pre`, `textarea`, inline `code`, and any element with `translate="no"`.
- Attributes come back with their values; text is escaped as HTML needs
  (`&amp;`, `&lt;`), and no text is dropped.

Example:

>>> page = HtmlPage.parse('<p>A <b>little girl</b> climbs.</p>')
>>> [segment.text for segment in page.segments]
['A little girl climbs.']
>>> from keras_transformer_runtime.text.markup import TranslatedText
>>> page.render([TranslatedText("Ein kleines Mädchen klettert.", [0, 1, 2, 3, 4])])
'<p>Ein <b>kleines Mädchen</b> klettert.</p>'
"""

import html
import re

from keras_transformer_runtime.text.markup import Page
from keras_transformer_runtime.text.markup import Span
from keras_transformer_runtime.text.markup import TaggedText
from keras_transformer_runtime.text.markup import Void

# Elements that flow inside a line of text: spans of a segment.
INLINE = frozenset(
    "a abbr b bdi bdo cite data del dfn em font i ins kbd label mark q s samp small span "
    "strong sub sup time u var".split()
)
# Elements without content: voids of a segment where they are inline.
VOID = frozenset("br img wbr input area embed source track col hr meta link base param".split())
# Tags a page may leave out (without attributes): not a repair.
OPTIONAL_TAGS = re.compile(r"</?(?:html|head|body)>")
# Elements whose text is never translated.
KEPT = frozenset("script style pre textarea code noscript template svg math".split())


class HtmlPage(Page):
    """A parsed web page (`Page`): `parse`, then `render` the translations
    of its `segments`; `repaired` says whether the parser had to repair the
    markup (the page as written is not what a browser builds from it)."""

    parser_module = "selectolax"

    @classmethod
    def as_html(cls, text):
        """The page itself."""
        return text

    @classmethod
    def parse(cls, text):
        """The page of `text`, a fragment or a whole document."""
        from selectolax.lexbor import LexborHTMLParser

        start = text.lstrip()
        document = start[:15].lower().startswith(("<!doctype", "<html"))
        tree = LexborHTMLParser(text)
        root = tree.root if document else tree.body
        builder = _Builder()
        if document:
            if start[:9].lower() == "<!doctype":
                builder.parts.append(start[: start.index(">") + 1])
            builder.outer(root)
        else:
            builder.children(root)
        builder.flush()
        # Repaired: what the parser built differs from what was written
        # beyond how it is written (quotes, case, whitespace, entities).
        built = root.html if document else root.inner_html
        repaired = _normalized(built or "") != _normalized(text)
        return cls(builder.segments, builder.parts, repaired)

    def escape(self, text):
        """Text as HTML writes it: `&`, `<` and `>` as entities."""
        return _escape(text)


class _Builder:
    """Walks a parsed tree into the page's parts and segments."""

    def __init__(self):
        self.parts, self.segments = [], []
        self.text, self.markup = [], [[]]  # the segment's; a list per open span

    def offset(self):
        return sum(len(t) for t in self.text)

    def void(self, markup, breaks=False):
        """A void here; a line break (`breaks`) also separates the words
        around it."""
        self.markup[-1].append(Void(self.offset(), markup))
        if breaks:
            self.text.append("\n")

    def flush(self):
        """Ends the current segment: whitespace alone stays as it is."""
        tagged = TaggedText("".join(self.text), tuple(self.markup[0]))
        if tagged.text.strip():
            self.parts.append(len(self.segments))
            self.segments.append(tagged)
        else:  # no words: as it was
            self.parts.append(tagged.placed(tagged.text, [], _escape))
        self.text, self.markup = [], [[]]

    def children(self, node):
        child = node.child
        while child is not None:
            self.node(child)
            child = child.next

    def node(self, node):
        tag = node.tag
        if tag == "-text":
            self.text.append(node.text(deep=False))
        elif tag.startswith("-"):  # a comment, as written
            self.void(node.html or "")
        elif tag in KEPT or node.attributes.get("translate") == "no":
            self.kept(node)
        elif tag in VOID:
            self.void(_opening(node), breaks=tag in ("br", "hr"))
        elif tag in INLINE:
            start = self.offset()
            self.markup.append([])
            self.children(node)
            inner = tuple(self.markup.pop())
            self.markup[-1].append(Span(start, self.offset(), _opening(node), f"</{tag}>", inner))
        else:
            self.flush()
            self.outer(node)

    def kept(self, node):
        """An element left as it is: a void inside a line, else a part."""
        if node.tag in INLINE or node.tag == "code":
            self.void(node.html)
        else:
            self.flush()
            self.parts.append(node.html)

    def outer(self, node):
        """A block element: its tags around its own segments."""
        self.parts.append(_opening(node))
        self.children(node)
        self.flush()
        if node.tag not in VOID:
            self.parts.append(f"</{node.tag}>")


def _escape(text):
    return html.escape(text, quote=False)


def _opening(node):
    attributes = "".join(
        f" {name}" if value is None else f' {name}="{html.escape(value, quote=True)}"'
        for name, value in node.attributes.items()
    )
    return f"<{node.tag}{attributes}>"


def _normalized(text):
    """`text` with the differences a repair does not make: quoting of
    attributes, case of tags, whitespace, and the `html`, `head` and
    `body` tags HTML lets a page leave out (the parser writes them)."""
    tree_free = html.unescape(text).strip().replace("'", '"').replace("/>", ">").lower()
    without_doctype = tree_free.split(">", 1)[1] if tree_free.startswith("<!doctype") else tree_free
    return OPTIONAL_TAGS.sub("", "".join(without_doctype.split()))

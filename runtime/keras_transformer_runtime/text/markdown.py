"""Markdown through a translator: parsed by markdown-it-py (a CommonMark
parser, the reference specification's test suite passed), each block's
inline content one segment, emphasis and links put back around the words
aligned to those they wrapped (`markup.TaggedText`).

- Paragraphs, headings, list items and quotes are segments; each keeps its
  own line prefix (`# `, `- `, `> `, `1. `), and a paragraph over several
  lines comes back on one.
- `*emphasis*`, `**strong**` and `[links](url "title")` are spans; the URL
  and title are kept as written.
- `` `code` ``, images, raw HTML and line breaks stay at their aligned
  position, untranslated; code blocks, fenced code, HTML blocks and
  thematic breaks come back line for line.

Example:

>>> from keras_transformer_runtime.text.markup import TranslatedText
>>> page = MarkdownPage.parse("A **little girl** climbs.\\n")
>>> page.render([TranslatedText("Ein kleines Mädchen klettert.", [0, 1, 2, 3, 4])])
'Ein **kleines Mädchen** klettert.\\n'
"""

import dataclasses
import functools
import re

from keras_transformer_runtime.text.markup import Page
from keras_transformer_runtime.text.markup import Span
from keras_transformer_runtime.text.markup import TaggedText
from keras_transformer_runtime.text.markup import Void

# Characters a translation could turn into markup: written escaped.
SPECIAL = re.compile(r"([\\`*_\[\]<])")


class MarkdownPage(Page):
    """A parsed Markdown document (`Page`): `parse`, then `render` the
    translations of its `segments`. An emphasis without aligned words
    wraps the word next to its place: `****` would be no emphasis. Where
    the words' new order brings delimiters together so that CommonMark
    would read other emphasis (`*a* *b*` placed as `**b a*`), the
    segment's emphasis is written as inline HTML (`<em>`, `<strong>`)
    instead, which CommonMark keeps as it is."""

    empty_spans = False
    parser_module = "markdown_it"

    @classmethod
    def as_html(cls, text):
        """The document rendered as CommonMark renders it (raw HTML kept)."""
        return _commonmark().render(text)

    @classmethod
    def parse(cls, text):
        """The document of `text` (CommonMark)."""
        lines = text.splitlines(keepends=True)
        parts, segments, line = [], [], 0
        for token in _commonmark().parse(text):
            if token.type != "inline" or not token.content.strip():
                continue
            first, count = token.map[0], token.content.count("\n") + 1
            parts.append("".join(lines[line:first]))
            head, last_line = token.content.split("\n", 1)[0], token.content.rsplit("\n", 1)[-1]
            # The block's prefix ("# ", "- ", "> ") and what follows its text.
            start = lines[first].find(head)
            if start < 0:  # escapes or tabs the content no longer has
                start = len(lines[first]) - len(lines[first].lstrip())
            last = lines[first + count - 1]
            end = last.rfind(last_line)
            tail = last[end + len(last_line) :] if end >= 0 else last[len(last.rstrip()) :]
            parts += [lines[first][:start], len(segments), tail]
            segments.append(_tagged(token.children))
            line = first + count
        parts.append("".join(lines[line:]))
        return cls(segments, [part for part in parts if part != ""])

    def escape(self, text):
        """Text as Markdown writes it: what would be markup, escaped."""
        return SPECIAL.sub(r"\\\1", text)

    def edges(self, segment):
        """None: the block's own prefix and line end are around it (more
        whitespace at a line's start could make it code)."""
        return "", ""

    def placed(self, segment, translated):
        """The segment's translation with its markup; its emphasis as
        inline HTML where the delimiters would read otherwise."""
        placed = super().placed(segment, translated)
        if _elements(placed) == _elements_of(segment.markup):
            return placed
        as_html = TaggedText(segment.text, _html_emphasis(segment.markup))
        return super().placed(as_html, translated)


def _tagged(children):
    """The `TaggedText` of an inline token's children."""
    text, stack = [], [[]]  # the markup of each open span, innermost last
    opened = []  # (start, opening, closing)

    def offset():
        return sum(len(t) for t in text)

    for child in children:
        kind = child.type
        if kind == "text":
            text.append(child.content)
        elif kind == "softbreak":
            text.append("\n")
        elif kind in ("em_open", "strong_open", "link_open"):
            closing = child.markup
            opening = child.markup
            if kind == "link_open":
                title = child.attrs.get("title")
                opening = "["
                closing = f"]({child.attrs['href']}" + (f' "{title}"' if title else "") + ")"
            opened.append((offset(), opening, closing))
            stack.append([])
        elif kind in ("em_close", "strong_close", "link_close"):
            start, opening, closing = opened.pop()
            inner = tuple(stack.pop())
            stack[-1].append(Span(start, offset(), opening, closing, inner))
        else:  # code, images, raw HTML, hard breaks: as written
            stack[-1].append(Void(offset(), _written(child)))
    return TaggedText("".join(text), tuple(stack[0]))


@functools.cache
def _commonmark():
    """The CommonMark parser, made once (every segment is checked with it)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark")


def _elements(text):
    """The emphasis and links CommonMark reads in an inline `text`."""
    tokens = _commonmark().parseInline(text)[0].children
    return sorted(t.type for t in tokens if t.type in ("em_open", "strong_open", "link_open"))


def _elements_of(markup):
    """The emphasis and links of a segment's markup."""
    found = []
    for item in markup:
        if isinstance(item, Span):
            kind = {"[": "link_open", "*": "em_open", "_": "em_open"}.get(item.opening)
            found += [kind or "strong_open", *_elements_of(item.inner)]
    return sorted(found)


def _html_emphasis(markup):
    """`markup` with its emphasis written as inline HTML."""
    written = []
    for item in markup:
        if isinstance(item, Span):
            item = dataclasses.replace(item, inner=_html_emphasis(item.inner))
            if item.opening != "[":
                tag = "em" if len(item.opening) == 1 else "strong"
                item = dataclasses.replace(item, opening=f"<{tag}>", closing=f"</{tag}>")
        written.append(item)
    return tuple(written)


def _written(token):
    """An inline token that is not translated, as Markdown writes it."""
    if token.type == "code_inline":
        return f"{token.markup}{token.content}{token.markup}"
    if token.type == "image":
        title = token.attrs.get("title")
        alt = "".join(child.content for child in token.children or ())
        return f"![{alt}]({token.attrs['src']}" + (f' "{title}"' if title else "") + ")"
    if token.type == "hardbreak":
        return "\\\n"
    return token.content

"""What an input is written in: plain text (`"text"`, the default), a web
page or fragment of one (`"html"`) or Markdown (`"markdown"`).

A runner translates plain text as it is. A document in markup is parsed
(`html.HtmlPage`, `markdown.MarkdownPage`); its segments (a paragraph,
a list item, a cell) are translated with every other page's, in one call
for those with inline markup and one for the rest, and a segment's inline
markup is put back around the target words aligned to the source words it
wrapped (`markup.TaggedText`), the alignment coming from the runner
(`word_alignment`). A segment without inline markup is translated as
plain text, without the alignments' cost. A runner that gives
no alignments (`translate_with_alignments` not among its `methods`)
places the markup by position: the middle of the n-th of m target words
is aligned to the source word at the same fraction of the source. A page
the parser had to repair says so (`TranslatedDocument.repaired`, and a
`RepairedMarkupWarning` from `translate`).

Example:

>>> kind = of("html")
>>> kind.name, kind.marked_up
('html', True)
>>> by_position([["A", "little", "girl"]], ["Ein kleines Mädchen ."])
[[0, 1, 1, 2]]
"""

import dataclasses
import importlib.util
import warnings

from keras_transformer_runtime import validation
from keras_transformer_runtime.runners.results import RefusedRequestError
from keras_transformer_runtime.text.html import HtmlPage
from keras_transformer_runtime.text.markdown import MarkdownPage
from keras_transformer_runtime.text.markup import TranslatedText
from keras_transformer_runtime.text.word_alignment import word_alignment
from keras_transformer_runtime.text.words import WORD


@dataclasses.dataclass(frozen=True)
class TranslatedDocument:
    """One input's translation, in its format.

    Attributes:
        translation: the translated text (a page: its markup put back).
        repaired: whether the input's markup was malformed, and repaired
            as a browser (HTML) repairs it before it was translated.
    """

    translation: str
    repaired: bool = False


class PlainText:
    """Inputs translated as they are."""

    name = "text"
    marked_up = False

    def available(self):
        """Whether this format's parser is installed: always."""
        return True

    def translate(self, texts, target_lang, plain, aligned):
        """A `TranslatedDocument` per text: `plain(texts, target_lang)`'s
        translations (a `RefusedRequestError` of `plain`, whose `done` are
        translations, raised again with `TranslatedDocument`s done)."""
        try:
            return [TranslatedDocument(t) for t in plain(texts, target_lang)]
        except RefusedRequestError as error:
            raise error.with_done([TranslatedDocument(t) for t in error.done]) from None


@dataclasses.dataclass(frozen=True)
class Markup:
    """Inputs in a markup language, parsed by `page.parse` (see the
    module's docstring)."""

    name: str
    page: type
    marked_up = True

    def available(self):
        """Whether this format's parser (the `[markup]` extra) is installed."""
        return importlib.util.find_spec(self.page.parser_module) is not None

    def require(self):
        """Raises `ImportError`, saying how to install it, if this format's
        parser is missing."""
        if not self.available():
            raise ImportError(
                f"format={self.name!r} needs {self.page.parser_module}, an optional extra of "
                "the runtime: pip install 'keras-transformer-runtime[markup]'."
            )

    def translate(self, texts, target_lang, plain, aligned):
        """A `TranslatedDocument` per text, the segments of all pages
        translated in two calls at most: those with inline markup by
        `aligned(segments, target_lang=...)` (`AlignedTranslation`s), the
        others (all of them where `aligned` is `None`) by
        `plain(segments, target_lang)`, their words aligned by position
        (a segment without markup needs no alignment). A
        `RefusedRequestError` of a segment is raised as one of its text,
        with the texts before it done."""
        self.require()
        pages = [self.page.parse(text) for text in texts]
        rows = [row for row, page in enumerate(pages) for _ in page.segments]
        segments = [segment for page in pages for segment in page.segments]
        sources = [segment.text.strip() for segment in segments]
        wanted = [i for i, source in enumerate(sources) if WORD.search(source)]
        marked = {i for i in wanted if aligned is not None and segments[i].markup}
        by_alignment, rest = sorted(marked), [i for i in wanted if i not in marked]
        done = {}
        try:
            if by_alignment:
                langs = self._langs(target_lang, rows, by_alignment)
                found = aligned([sources[i] for i in by_alignment], target_lang=langs)
                for i, translated in zip(by_alignment, found, strict=True):
                    done[i] = (translated.translation, word_alignment(translated, sources[i]))
            if rest:
                parts = [sources[i] for i in rest]
                translations = plain(parts, self._langs(target_lang, rows, rest))
                words = [[m.group() for m in WORD.finditer(part)] for part in parts]
                found = zip(translations, by_position(words, translations), strict=True)
                done.update(zip(rest, found, strict=True))
        except RefusedRequestError as error:
            called = by_alignment if len(done) < len(by_alignment) else rest
            raise self._refused(error, called, rows, texts, target_lang, plain, aligned) from None
        translated, start = [], 0
        for page in pages:
            count = len(page.segments)
            found = [
                TranslatedText(*done.get(i, (sources[i], [])))
                for i in range(start, start + count)
            ]  # fmt: skip
            start += count
            translated.append(TranslatedDocument(page.render(found), page.repaired))
        return translated

    def _refused(self, error, called, rows, texts, target_lang, plain, aligned):
        """`error`, refusing the segments `called[error.start:error.end]`, as
        a `RefusedRequestError` of the texts they are in, with the texts
        before them translated again as its `done` (which may raise the
        refusal of an earlier text instead)."""
        start, end = rows[called[error.start]], rows[called[error.end - 1]] + 1
        langs = target_lang[:start] if isinstance(target_lang, (list, tuple)) else target_lang
        done = self.translate(texts[:start], langs, plain, aligned) if start else []
        return RefusedRequestError(error.reason, start, end, done)

    @staticmethod
    def _langs(target_lang, rows, segments):
        """`target_lang` for the `segments` (indices), where it is given per
        text (`rows[i]`: the text of segment `i`)."""
        if isinstance(target_lang, (list, tuple)):
            return [target_lang[rows[i]] for i in segments]
        return target_lang


def of(name):
    """The format named `name`: one of `NAMES`.

    Raises:
        ValueError: another name.
    """
    validation.check_choice(NAMES, format=name)
    return FORMATS[name]


def available():
    """The names of the formats whose parsers are installed."""
    return [name for name, kind in FORMATS.items() if kind.available()]


def by_position(source_words, translations):
    """For each translation, each of its words (`WORD`) aligned to the
    source word at the same fraction of the source (`source_words`: per
    translation, its source's words): how a runner without alignments
    places markup."""
    alignments = []
    for words, translation in zip(source_words, translations, strict=True):
        count = sum(1 for _ in WORD.finditer(translation))
        alignments.append(
            [(2 * j + 1) * len(words) // (2 * count) if words else None for j in range(count)]
        )
    return alignments


def warn_repaired(documents, stacklevel=2):
    """A `RepairedMarkupWarning` naming the documents whose markup was
    repaired, if any."""
    repaired = [row for row, document in enumerate(documents) if document.repaired]
    if repaired:
        warnings.warn(RepairedMarkupWarning(repaired), stacklevel=stacklevel + 1)


class RepairedMarkupWarning(RuntimeWarning):
    """Inputs held malformed markup, repaired as a browser repairs it
    before they were translated (a misnested `<b><i></b></i>`, an
    unclosed element); no text was dropped.

    Attributes:
        inputs: the 0-based indices of those inputs.
    """

    def __init__(self, inputs):
        self.inputs = list(inputs)
        super().__init__(
            f"{len(self.inputs)} input(s) held malformed markup, repaired as a browser "
            f"repairs it (inputs {self.inputs[:10]})."
        )


FORMATS = {
    "text": PlainText(),
    "html": Markup("html", HtmlPage),
    "markdown": Markup("markdown", MarkdownPage),
}
NAMES = tuple(FORMATS)

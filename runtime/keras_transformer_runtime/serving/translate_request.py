"""`/translate`'s requests and answers, checked: texts (`TranslateRequest`)
or web pages and Markdown (`DocumentRequest`, `"format": "html"` or
`"markdown"`).

A request for documents is translated by the runner's
`translate_documents`: each page's segments with those of the pages that
came with it, its markup put back around the aligned words; its answer
says of each page whether its markup was `repaired`.
"""

import dataclasses

from keras_transformer_runtime.serving.batcher import Documents
from keras_transformer_runtime.serving.batcher import Translation
from keras_transformer_runtime.serving.protocol import TEXT
from keras_transformer_runtime.serving.protocol import BadRequest
from keras_transformer_runtime.serving.protocol import checked_keys
from keras_transformer_runtime.serving.protocol import tagged_texts
from keras_transformer_runtime.serving.protocol import texts_of
from keras_transformer_runtime.text import formats

FIELDS = ("text", "n_best", "with_scores", "target_lang", "format", "rendered")


@dataclasses.dataclass(frozen=True)
class TranslateRequest:
    """A `/translate` request: `{"text": [...] or "...", "n_best"?: int,
    "with_scores"?: bool, "target_lang"?: str or [str], "format"?:
    "text"}`.

    The answer, `{"translations": [...]}`, has one object per text: its
    best `translation`; with `with_scores`, its `score` and, where the
    runner gives token scores (and `n_best` is 1), its `tokens`,
    `token_scores` and `words` (`[[word, log_prob], ...]`, the word's
    pieces summed); with `n_best` above 1, its `alternatives`, best first
    (`translation`, and `score` with `with_scores`); and `"truncated":
    true` where a sentence of the text was longer than the export's
    `max_input_length` and translated in pieces of whole words (as
    `:predict`'s `truncated` output, a SavedModel's, says of each text).
    """

    texts: list
    n_best: int = 1
    with_scores: bool = False
    target_lang: str | list | None = None

    @classmethod
    def parse(cls, body, max_n_best):
        """The request in `body` (a JSON object) for a runner that gives at
        most `max_n_best` translations: a `TranslateRequest`, or a
        `DocumentRequest` for a `format` other than `"text"`;
        `target_lang` (a language, or one per text) is checked against the
        model's by `tagged_texts`."""
        checked_keys(body, FIELDS, "a request")
        if "text" not in body:
            raise BadRequest('A /translate request must give `text`: {"text": ["..."]}.')
        text = body["text"]
        texts = texts_of([text] if isinstance(text, str) else text, TEXT)
        n_best = body.get("n_best", 1)
        if isinstance(n_best, bool) or not isinstance(n_best, int) or not 1 <= n_best <= max_n_best:
            raise BadRequest(
                f"`n_best` must be an integer from 1 to {max_n_best} (this model's beam). "
                f"Received: n_best={n_best!r}"
            )
        with_scores = body.get("with_scores", False)
        if not isinstance(with_scores, bool):
            raise BadRequest(f"`with_scores` must be true or false. Received: {with_scores!r}")
        target_lang = body.get("target_lang")
        if target_lang is not None and not isinstance(target_lang, str):
            target_lang = texts_of(target_lang, "target_lang")
        format = body.get("format", "text")
        if format not in formats.NAMES:
            accepted = ", ".join(f'"{name}"' for name in formats.NAMES)
            raise BadRequest(f"`format` must be one of {accepted}. Received: format={format!r}")
        kind = formats.of(format)
        rendered = body.get("rendered", False)
        if not isinstance(rendered, bool) or (rendered and not kind.marked_up):
            raise BadRequest(
                '`rendered` (true or false) goes with "format": "html" or "markdown". '
                f"Received: rendered={rendered!r}, format={format!r}"
            )
        if not kind.marked_up:
            return cls(texts, n_best, with_scores, target_lang)
        if n_best != 1 or with_scores:
            raise BadRequest(
                f'`"format": "{format}"` gives one translation of each document, without '
                f"scores. Received: n_best={n_best}, with_scores={str(with_scores).lower()}"
            )
        try:
            kind.require()
        except ImportError as error:
            raise BadRequest(f"This server cannot translate {format}: {error}") from None
        return DocumentRequest(texts, target_lang=target_lang, format=format, rendered=rendered)

    def inputs(self, languages):
        """What the batcher is given: the texts, each tagged with its
        `target_lang` for a multilingual model (`languages`)."""
        return tagged_texts(self.texts, self.target_lang, languages)

    def counted(self, found):
        """`(texts, truncated)`: how many texts the answer holds, and how
        many of them were translated in pieces (for the metrics)."""
        return len(found), sum(bool(row and row[0].truncated) for row in found)

    def task(self, has_token_scores):
        """What the runner is asked: token scores with `with_scores`, where
        it has them, for the best translation only."""
        token_scores = self.with_scores and has_token_scores and self.n_best == 1
        return Translation(n_best=self.n_best, token_scores=token_scores)

    def answer(self, hypotheses):
        """The response body for the runner's `Hypothesis` lists."""
        return {"translations": [self._item(row) for row in hypotheses]}

    def _item(self, row):
        best = row[0]
        item = {"translation": best.translation}
        if best.truncated:
            item["truncated"] = True
        if self.with_scores:
            item["score"] = best.score
            if best.token_scores:
                item["tokens"] = best.tokens
                item["token_scores"] = best.token_scores
                item["words"] = [[word, score] for word, score in best.word_scores]
        if self.n_best > 1:
            item["alternatives"] = [
                {"translation": h.translation, **({"score": h.score} if self.with_scores else {})}
                for h in row
            ]
        return item


@dataclasses.dataclass(frozen=True)
class DocumentRequest(TranslateRequest):
    """A `/translate` request for web pages or Markdown: `{"text": [...],
    "format": "html" or "markdown", "target_lang"?, "rendered"?: bool}`.
    The answer, `{"translations": [...]}`, has one object per document:
    its `translation`, whether its markup was `repaired`, and with
    `rendered` the translation as `html` to show (Markdown rendered as
    CommonMark renders it)."""

    format: str = "html"
    rendered: bool = False

    def inputs(self, languages):
        """`(document, target_lang)` pairs: a page is parsed before its
        segments are tagged with its language (by the runner)."""
        langs = self.target_lang
        if not isinstance(langs, list):
            langs = [langs] * len(self.texts)
        elif len(langs) != len(self.texts):
            raise BadRequest(
                "`target_lang` must be one language, or one per text. Received: "
                f"{len(langs)} languages for {len(self.texts)} texts"
            )
        for code in sorted({code for code in langs if code is not None}):
            try:
                languages.check(code)
            except ValueError as error:
                raise BadRequest(str(error)) from None
        return list(zip(self.texts, langs, strict=True))

    def task(self, has_token_scores):
        """`translate_documents` in this format, with languages or not."""
        return Documents(self.format, self.target_lang is not None)

    def answer(self, documents):
        """The response body for the runner's `TranslatedDocument`s."""
        page = formats.of(self.format).page
        answers = [{"translation": d.translation, "repaired": d.repaired} for d in documents]
        if self.rendered:
            for answer in answers:
                answer["html"] = page.as_html(answer["translation"])
        return {"translations": answers}

    def counted(self, found):
        return len(found), 0

"""`Runner`: the Python API every translator of the package shares.

`keras_transformer.Translator` (the Keras model and the searches in
TensorFlow graphs), `SavedModelTranslator` (an export for TF Serving),
`CTranslate2Translator`, `LiteRTTranslator` and `ONNXTranslator` take the
same calls and return the same result types (`keras_transformer_runtime.
results`), so that code written against one runs against another:

    translate(sentences, batch_size=None, target_lang=None,
              format="text")                                   -> [str]
    translate_documents(texts, format="text", batch_size=None,
                        target_lang=None)                      -> [TranslatedDocument]
    translate_with_scores(sentences, n_best=1, token_scores=False,
                          batch_size=None, target_lang=None)   -> [[Hypothesis]]
    sample(sentences, num_samples=1, seed=0, batch_size=None,
           target_lang=None)                                   -> [[Hypothesis]]
    score(sources, targets, batch_size=None, target_lang=None) -> [TargetScore]
    translate_with_constraints(sentences, constraints=None, banned=None,
                               batch_size=None, glossary=None,
                               target_lang=None)               -> [Hypothesis]
    translate_with_alignments(sentences, batch_size=None,
                              target_lang=None)                -> [AlignedTranslation]
    describe()                                                 -> str

`batch_size` is the most sentences per call of the model; `None` (the
default) is the runner's `bulk_batch_size`, the size at which its kind
of runner translates a long list fastest on a CPU.

A runner lists what it supports in `methods`; the others raise
`NotImplementedError` naming the runner. Sentences are strings, or bytes
(decoded as UTF-8, invalid bytes replaced, by the runners that tokenize
on the host; passed as they are to a graph).

An input may be a whole text: with `settings.split_sentences` (the
default) each is split into sentences, translated with the others' and
joined back with its own separators, and a sentence longer than
`max_input_length` is translated in pieces of whole words, with a
`RuntimeWarning` (`keras_transformer_runtime.text.documents`). A subclass
implements the methods on sentences (`_translate_with_scores`,
`_sample`, `_translate_with_constraints`) and `_source_lengths`; the
public methods split and join.

A multilingual model (one whose vocabulary has target-language tags,
`languages`) translates into the language each request names:
`target_lang` is one code for all inputs or a list of one per input, and
every sentence of an input is tagged with its language before it is
translated (`keras_transformer_runtime.text.languages`); an unknown language
is a `ValueError` naming the model's.

An input may be a web page or Markdown (`format`, see
`keras_transformer_runtime.text.formats`): its segments are translated
and its inline markup put back around the aligned words.
"""

import dataclasses
import functools
import json

from keras_transformer_runtime import validation
from keras_transformer_runtime.runners.constrained import SentenceConstraints
from keras_transformer_runtime.runners.results import RefusedRequestError
from keras_transformer_runtime.text import formats
from keras_transformer_runtime.text import glossary as glossary_module
from keras_transformer_runtime.text.documents import Split
from keras_transformer_runtime.text.languages import TargetLanguages

TRANSLATE = "translate"
TRANSLATE_WITH_SCORES = "translate_with_scores"
SAMPLE = "sample"
SCORE = "score"
TRANSLATE_WITH_CONSTRAINTS = "translate_with_constraints"
TRANSLATE_WITH_ALIGNMENTS = "translate_with_alignments"
METHODS = (TRANSLATE, TRANSLATE_WITH_SCORES, SAMPLE, SCORE)
METHODS += (TRANSLATE_WITH_CONSTRAINTS, TRANSLATE_WITH_ALIGNMENTS)


def as_text(sentence):
    """A sentence as text: bytes are decoded as UTF-8, invalid bytes
    replaced (a command line reads lines as bytes)."""
    return sentence.decode("utf-8", errors="replace") if isinstance(sentence, bytes) else sentence


def check_n_best(n_best, beam_size):
    """Raises unless `n_best` is an integer between 1 and `beam_size`."""
    if isinstance(n_best, bool) or not isinstance(n_best, int) or not 1 <= n_best <= beam_size:
        raise ValueError(
            f"`n_best` must be between 1 and the beam size ({beam_size}). "
            f"Received: n_best={n_best!r}"
        )


def export_description(label, quantization, settings):
    """`describe`'s text for an export run on the host: what it is, the
    weights' type, the decoding settings."""
    return "\n".join(
        [
            label,
            f"quantization: {quantization}",
            "decoding settings: " + json.dumps(settings.to_dict(), sort_keys=True),
        ]
    )


class Runner:
    """The translator protocol (see the module's docstring).

    Subclasses set `methods` (the names of the methods they implement,
    from `METHODS`) and override those; `translate` is the best of
    `translate_with_scores`.

    Attributes:
        methods: the names of the supported methods.
        has_token_scores: whether `translate_with_scores` gives token
            scores (`token_scores=True`).
        settings: the `DecodingSettings` the runner decodes with.
        model: the Keras model the runner runs in this process
            (`Translator`'s), or `None` (an export).
        limits: what one request may hold, `{"max_batch_size",
            "max_input_tokens"}` (sentences, and source tokens with each
            EOS), as an export records them; `None`: no limit.
        languages: the `TargetLanguages` the model knows (the tags in its
            vocabulary; empty for a model of one language pair).
        bulk_batch_size: the sentences per call with which this kind of
            runner translates a long list fastest on a CPU: what a
            method's `batch_size=None` (the default) means, and so the
            default of `CorpusJob` and of the `translate` and
            `translate_corpus` commands.
        shared_by_threads: whether one runner runs calls from several
            threads in parallel (a SavedModel's functions; CTranslate2's
            `inter_threads`): the server's workers then share one.
    """

    methods = frozenset({TRANSLATE})
    has_token_scores = False
    shared_by_threads = False
    model = None
    limits = {"max_batch_size": None, "max_input_tokens": None}
    languages = TargetLanguages()
    bulk_batch_size = 64

    @property
    def name(self):
        """The runner's name in messages: its class's."""
        return type(self).__name__

    @property
    def max_n_best(self):
        """The most translations `translate_with_scores` gives per input:
        the beam size."""
        return self.settings.beam_size

    def source_lengths(self, texts):
        """Each text's source tokens as the model's tokenizer counts them,
        EOS not counted (a text of several sentences counted whole)."""
        return self._source_lengths([as_text(text) for text in texts])

    def supports(self, method):
        """Whether the runner implements `method` (a name of `METHODS`)."""
        validation.check_choice(METHODS, method=method)
        return method in self.methods

    def _unsupported(self, method):
        supported = ", ".join(m for m in METHODS if m in self.methods)
        raise NotImplementedError(
            f"{self.name} does not support `{method}`; it supports: {supported}."
        )

    def resolve_batch_size(self, batch_size):
        """The sentences per call for a method given `batch_size`: it, a
        positive integer, or this runner's `bulk_batch_size` for `None`.

        Example:

        >>> LiteRTTranslator("ende.tflite").resolve_batch_size(None)
        8
        """
        if batch_size is None:
            return self.bulk_batch_size
        validation.check_positive_int(batch_size=batch_size)
        return batch_size

    def translate(self, sentences, batch_size=None, target_lang=None, format="text"):
        """The best translation of each input, in order (into
        `target_lang`; a web page or Markdown with `format`: see the
        module's docstring), with a `RepairedMarkupWarning` naming the
        inputs whose markup was malformed."""
        try:
            documents = self.translate_documents(sentences, format, batch_size, target_lang)
        except RefusedRequestError as error:
            raise error.with_done([document.translation for document in error.done]) from None
        formats.warn_repaired(documents)
        return [document.translation for document in documents]

    def translate_documents(self, texts, format="text", batch_size=None, target_lang=None):
        """Each input translated in its `format` (`"text"`, `"html"`,
        `"markdown"`; `keras_transformer_runtime.text.formats`): a
        `TranslatedDocument` per input, saying whether its markup was
        repaired.

        Example:

        >>> translator.translate_documents(["A <b>little girl</b>."], "html")[0].translation
        'Ein <b>kleines Mädchen</b>.'
        """
        batch_size = self.resolve_batch_size(batch_size)

        def plain(texts, target_lang):
            try:
                found = self.translate_with_scores(texts, 1, False, batch_size, target_lang)
            except RefusedRequestError as error:
                raise error.with_done([options[0].translation for options in error.done]) from None
            return [options[0].translation for options in found]

        aligned = None  # without the model's alignments, markup is placed by position
        if TRANSLATE_WITH_ALIGNMENTS in self.methods:
            aligned = functools.partial(self.translate_with_alignments, batch_size=batch_size)
        texts = [as_text(text) for text in texts]
        return formats.of(format).translate(texts, target_lang, plain, aligned)

    def translate_with_alignments(self, sentences, batch_size=None, target_lang=None):
        """The best translation of each input as an `AlignedTranslation`:
        its pieces, the source pieces, and for each target piece the
        source piece it attends to most (an input of several sentences
        joins its sentences', see `text.documents`)."""
        if TRANSLATE_WITH_ALIGNMENTS not in self.methods:
            self._unsupported(TRANSLATE_WITH_ALIGNMENTS)
        batch_size = self.resolve_batch_size(batch_size)
        return self._joined(
            self.split(sentences, target_lang),
            lambda part: self._translate_with_alignments(part, batch_size),
            lambda head, done: head.aligned(done),
        )

    def translate_with_scores(
        self, sentences, n_best=1, token_scores=False, batch_size=None, target_lang=None
    ):
        """For each input, its `n_best` best `Hypothesis` (at most the beam
        size), best first; with `token_scores`, each with its tokens and
        their log-probabilities. An input of several sentences joins its
        sentences' i-th best into its i-th."""
        batch_size = self.resolve_batch_size(batch_size)
        return self._hypotheses_per_input(
            TRANSLATE_WITH_SCORES,
            self.split(sentences, target_lang),
            lambda part: self._translate_with_scores(part, n_best, token_scores, batch_size),
            n_best,
        )

    def sample(self, sentences, num_samples=1, seed=0, batch_size=None, target_lang=None):
        """For each input, `num_samples` translations drawn at random
        (`temperature`, `top_k`, `top_p`) as `Hypothesis`, repeatable with
        the same `seed` and `batch_size`; an input of several sentences
        joins its sentences' i-th draws into its i-th."""
        batch_size = self.resolve_batch_size(batch_size)
        return self._hypotheses_per_input(
            SAMPLE,
            self.split(sentences, target_lang),
            lambda part: self._sample(part, num_samples, seed, batch_size),
            num_samples,
        )

    def score(self, sources, targets, batch_size=None, target_lang=None):
        """How likely the model finds each target for its source (forced
        decoding): a `TargetScore` per pair, each pair scored whole (a
        multilingual model's as a translation into `target_lang`)."""
        self._unsupported(SCORE)

    def tagged_sources(self, sources, target_lang):
        """`sources` as a multilingual model reads them, each tagged with
        its `target_lang` (see `languages.TargetLanguages.requested`); for
        a model of one language, as they are."""
        return self.languages.tagged_texts(sources, target_lang)

    def translate_with_constraints(
        self,
        sentences,
        constraints=None,
        banned=None,
        batch_size=None,
        glossary=None,
        target_lang=None,
    ):
        """The best translation of each input that holds its
        `constraints` and none of its `banned` phrases (per input, a list
        of phrases): a `Hypothesis` per input, with `constraints_met`.

        An input of several sentences bans its phrases in each; its
        constraints are looked for in its sentences' translations without
        them first, and each one none of them holds is given to its
        longest sentence, translated again with it. A `glossary`
        (`keras_transformer_runtime.Glossary`) gives each sentence the
        target terms of the source terms it holds, after its input's own.
        """
        if TRANSLATE_WITH_CONSTRAINTS not in self.methods:
            self._unsupported(TRANSLATE_WITH_CONSTRAINTS)
        batch_size = self.resolve_batch_size(batch_size)
        texts = list(sentences)
        terms = {
            name: glossary_module.phrase_lists(name, value, len(texts))
            for name, value in (("constraints", constraints), ("banned", banned))
        }
        split = self.split(texts, target_lang)
        run = SentenceConstraints(
            split, terms, glossary,
            lambda part, wanted, banned: self._translate_with_constraints(
                part, wanted, banned, batch_size
            ),
        )  # fmt: skip
        joined = self._joined(
            split, run, lambda head, done: [h[0] for h in head.hypotheses([[h] for h in done], 1)]
        )
        # An input with nothing to translate meets its constraints if it has none.
        return [
            h if h.constraints_met is not None
            else dataclasses.replace(h, constraints_met=not terms["constraints"][row])
            for row, h in enumerate(joined)
        ]  # fmt: skip

    def _hypotheses_per_input(self, method, split, run, count):
        """`method`'s results: `run(sentences)` (per sentence, a list of
        `count` `Hypothesis`) on the `split` inputs, joined per input."""
        if method not in self.methods:
            self._unsupported(method)
        return self._joined(split, run, lambda head, done: head.hypotheses(done, count))

    def _joined(self, split, run, join):
        """`join(split, run(split.sentences))`; a `RefusedRequestError`
        raised for sentences is raised again for the inputs they belong
        to, with the joined results of the inputs before them."""
        try:
            return join(split, run(split.sentences))
        except RefusedRequestError as error:
            start, end = split.row_of(error.start), split.row_of(error.end - 1) + 1
            head = split.head(start)
            done = join(head, error.done[: len(head.sentences)])
            raise RefusedRequestError(error.reason, start, end, done) from None

    def split(self, sentences, target_lang=None):
        """`sentences` as the runner translates them (`Split`), each
        tagged with its `target_lang` for a multilingual model, with a
        `RuntimeWarning` if one is over `max_input_length` (less its
        tag's tokens)."""
        texts, codes = self.languages.requested(sentences, target_lang)
        limit = self.settings.max_input_length  # None: no limit
        split = Split.of(
            texts,
            self.settings.split_sentences,
            None if limit is None else limit - 1 - self._tag_length(),
            self._source_lengths,
        )
        split.warn(limit, stacklevel=3)
        if self.languages:
            rows = split.rows()
            tagged = [
                self.languages.tagged(as_text(sentence), codes[row])
                for sentence, row in zip(split.sentences, rows, strict=True)
            ]
            split = dataclasses.replace(split, sentences=tagged)
        return split

    def _tag_length(self):
        """The most source tokens a language tag adds to a sentence (0 for
        a model of one language)."""
        if not self.languages:
            return 0
        if "_tag_tokens" not in self.__dict__:
            plain = self._source_lengths(["a"])[0]
            tagged = self._source_lengths([self.languages.tagged("a", c) for c in self.languages])
            self._tag_tokens = max(tagged) - plain
        return self._tag_tokens

    def _source_lengths(self, texts):
        """Each text's source tokens, EOS not counted."""
        raise NotImplementedError

    def _translate_with_scores(self, sentences, n_best, token_scores, batch_size):
        """`translate_with_scores` of sentences (a subclass's)."""
        self._unsupported(TRANSLATE_WITH_SCORES)

    def _sample(self, sentences, num_samples, seed, batch_size):
        """`sample` of sentences (a subclass's)."""
        self._unsupported(SAMPLE)

    def _translate_with_constraints(self, sentences, constraints, banned, batch_size):
        """`translate_with_constraints` of sentences, `constraints` and
        `banned` checked lists of phrases per sentence (a subclass's)."""
        self._unsupported(TRANSLATE_WITH_CONSTRAINTS)

    def _translate_with_alignments(self, sentences, batch_size):
        """`translate_with_alignments` of sentences: an
        `AlignedTranslation` each (a subclass's)."""
        self._unsupported(TRANSLATE_WITH_ALIGNMENTS)

    def describe(self):
        """What the runner runs, as text: the model, its settings."""
        raise NotImplementedError

"""`TranslationRequest`: the options of one `Translator.translate` call,
checked once, against each other and the translator's settings."""

import dataclasses
import random

import tensorflow as tf

from keras_transformer_runtime import validation
from keras_transformer_runtime.runners import runner
from keras_transformer_runtime.text import formats
from keras_transformer_runtime.text import glossary


@dataclasses.dataclass(frozen=True)
class TranslationRequest:
    """What `Translator.translate` was asked for (see its docstring).

    Make one with `TranslationRequest.checked`, which refuses options that
    do not go together.

    Attributes:
        sentences: the sentences, a list.
        prefixes: per sentence, the prefix its translation starts with, or
            `None`.
        max_output_length: the output-length cap, or `None`.
        return_alignments: return `AlignedTranslation`s.
        constraints, banned: per sentence, lists of phrases, or `None`.
        seed: sampling's seed (drawn at random when sampling without one);
            `None` for the other searches.
        target_lang: a multilingual model's target language(s), checked
            by the translator's `split` (`None`: none asked for).
        format: the inputs' format (`keras_transformer_runtime.text.formats`).
    """

    sentences: list
    prefixes: list | None = None
    max_output_length: int | None = None
    return_alignments: bool = False
    constraints: list | None = None
    banned: list | None = None
    seed: int | None = None
    target_lang: str | list | None = None
    format: object = formats.of("text")

    @property
    def with_options(self):
        """Whether a prefix or an output-length cap is asked for."""
        return self.prefixes is not None or self.max_output_length is not None

    @property
    def with_terms(self):
        """Whether constraints or banned phrases are asked for."""
        return self.constraints is not None or self.banned is not None

    @classmethod
    def checked(cls, strategy, sentences, **options):
        """The request for `sentences` and `options` (the keyword arguments
        of `Translator.translate`), for a translator whose settings choose
        the search `strategy` (a `decoding.SearchStrategy`).

        Raises:
            ValueError: an option out of range, or options that do not go
                together; the message names them.
        """
        request = cls(list(sentences), **options)
        if not isinstance(request.format, formats.PlainText | formats.Markup):
            request = dataclasses.replace(request, format=formats.of(request.format))
        count = len(request.sentences)
        sampling = strategy.draws_at_random
        changes = {}
        if request.prefixes is not None:
            changes["prefixes"] = list(request.prefixes)
            if len(changes["prefixes"]) != count:
                raise ValueError(
                    "`prefixes` must hold one prefix per sentence. Received: "
                    f"{len(changes['prefixes'])} prefixes for {count} sentences"
                )
        if request.max_output_length is not None:
            validation.check_positive_int(max_output_length=request.max_output_length)
        if request.return_alignments and (request.with_options or sampling):
            raise ValueError(
                "`return_alignments` works with beam search (or greedy) and no prefixes or "
                f"max_output_length. Received: {strategy}, "
                f"{request._options_received()}"
            )
        if request.with_terms:
            changes["constraints"] = glossary.phrase_lists(
                "constraints", request.constraints, count
            )
            changes["banned"] = glossary.phrase_lists("banned", request.banned, count)
            if request.with_options or request.return_alignments or sampling:
                raise ValueError(
                    "`constraints` and `banned` work with beam search (or greedy) and no "
                    f"prefixes, max_output_length or return_alignments. Received: "
                    f"{strategy}, {request._options_received()}, "
                    f"return_alignments={request.return_alignments}"
                )
        if request.format.marked_up and (
            request.with_options or request.with_terms or request.return_alignments or sampling
        ):
            raise ValueError(
                f"`format={request.format.name!r}` works with beam search (or greedy) and no "
                "prefixes, max_output_length, constraints, banned or return_alignments. "
                f"Received: {strategy}, {request._options_received()}, "
                f"return_alignments={request.return_alignments}"
            )
        if request.seed is not None and not sampling:
            raise ValueError(
                f"`seed` is for search='sample'; this translator's search is "
                f"{strategy}. Received: seed={request.seed!r}"
            )
        if request.seed is not None:
            validation.check_non_negative_int(seed=request.seed)
        elif sampling:
            changes["seed"] = random.SystemRandom().randrange(2**62)
        return dataclasses.replace(request, **changes)

    def _options_received(self):
        prefixes = "given" if self.prefixes is not None else None
        return f"prefixes={prefixes}, max_output_length={self.max_output_length}"


def check_constraints(tokenizer, sentences, constraints, found=None):
    """Refuses a constraint (per sentence, a list of phrases; with the
    terms a `Glossary` `found` in it) that would be met by something else:
    one with no piece (empty or spaces: met by anything), and one with
    characters `tokenizer`'s target vocabulary cannot write (they would
    come out as unknown pieces, which translations drop)."""
    constraints = glossary.phrase_lists("constraints", constraints, len(sentences))
    if found is not None:
        terms = [found.constraints(runner.as_text(s)) for s in sentences]
        constraints = [own + more for own, more in zip(constraints, terms, strict=True)]
    phrases = sorted({phrase for sentence in constraints for phrase in sentence})
    for phrase in phrases:
        if not phrase.strip():
            raise ValueError(
                "Each of `constraints` must hold at least one character other than "
                f"spaces. Received: {phrase!r}"
            )
    unk_id = tokenizer.unk_id
    if not phrases or unk_id < 0:
        return
    pieces = tokenizer.tokenize_target(tf.constant(phrases)).to_list()
    for phrase, ids in zip(phrases, pieces, strict=True):
        if unk_id in ids:
            raise ValueError(
                "Each of `constraints` must be written with the target vocabulary: "
                f"{phrase!r} holds characters it lacks, which would come out as unknown "
                f"pieces. Received: {phrase!r}"
            )

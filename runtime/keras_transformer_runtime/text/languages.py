"""Target-language tags: how one model translates into several languages.

A multilingual model learns its target language from a tag before the
source, OPUS-MT's convention: `">>fr<< A dog runs."` asks for French. The
tag is one piece of the vocabulary (`train_sentencepiece(...,
user_defined_symbols=[">>fr<<", ...])`), so the languages a model knows
are the tags among its pieces, and every runner finds them there
(`TargetLanguages.of_pieces`). Requests name the language
(`Runner.translate(sentences, target_lang="fr")`, one for all or one per
sentence) and the runner writes the tag before each sentence it
translates; a language the model does not know is refused with the ones
it knows, never translated into another.

Example:

>>> languages = TargetLanguages.of_pieces(["<pad>", ">>de<<", ">>fr<<", "▁A"])
>>> languages.codes
('de', 'fr')
>>> languages.tagged("A dog.", "fr")
'>>fr<< A dog.'
"""

import dataclasses
import re

TAG = re.compile(r">>([^\s<>]+)<<")
# A tag typed at the start of a text (OPUS-MT's way), and the space after it.
_LEADING_TAG = re.compile(r"\s*>>([^\s<>]+)<<\s*")


def tag(code):
    """The tag of language `code`: `">>fr<<"`."""
    return f">>{code}<<"


def tags(codes):
    """The tags of `codes`, in order (what a vocabulary needs as user
    symbols)."""
    return [tag(code) for code in codes]


def check_codes(target_lang):
    """`target_lang` (`"de,fr"`, or a list of codes) as a tuple of distinct
    codes; raises `ValueError` naming it if one is empty, repeated or not
    a tag's content (letters, digits, `_` or `-`)."""
    codes = target_lang.split(",") if isinstance(target_lang, str) else list(target_lang)
    codes = [code.strip() if isinstance(code, str) else code for code in codes]
    for code in codes:
        if not isinstance(code, str) or not re.fullmatch(r"[\w-]+", code):
            raise ValueError(
                "Each target language must be a code of letters, digits, `_` or `-` "
                f"(such as 'de' or 'pt_BR'). Received: target_lang={target_lang!r}"
            )
    if not codes or len(set(codes)) < len(codes):
        raise ValueError(
            f"`target_lang` must name distinct languages. Received: target_lang={target_lang!r}"
        )
    return tuple(codes)


@dataclasses.dataclass(frozen=True)
class TargetLanguages:
    """The target languages a model knows (`codes`, sorted; empty for a
    model of one language pair) and the requests that name them.

    Attributes:
        codes: the language codes, such as `("cs", "de", "fr")`.
        required: whether a text must name its language (a model trained
            with a tag on every source, as this package trains them); an
            OPUS-MT model's tokenizer says `False`: its tools translate a
            text without a tag as it is.
    """

    codes: tuple = ()
    required: bool = True

    @classmethod
    def of_pieces(cls, pieces, required=True):
        """The languages whose tags are among `pieces` (any iterable of
        strings: a vocabulary)."""
        found = {TAG.fullmatch(piece) for piece in pieces if isinstance(piece, str)}
        return cls(tuple(sorted(match.group(1) for match in found if match)), required)

    def __bool__(self):
        return bool(self.codes)

    @property
    def requires_target_lang(self):
        """Whether each request must name a language: a multilingual model
        whose tags are `required` (its SavedModel signatures then take a
        `target_lang` input)."""
        return bool(self.codes) and self.required

    def __iter__(self):
        return iter(self.codes)

    def tagged(self, text, code):
        """`text` asking for `code` (a known language): `">>fr<< " + text`,
        without the model's tags that `text` itself holds (a user's text
        never chooses the language, `untagged`); as it is for `code=None`
        and for a text without characters (which translates to nothing in
        any language)."""
        if code is None or not text.strip():
            return text
        return f"{tag(code)} {self.untagged(text).lstrip()}"

    def untagged(self, text):
        """`text` without the tags of the model's languages it holds (and
        the spaces before each), so that a text's words cannot choose its
        language: `"A >>fr<< dog."` -> `"A dog."`."""
        if not self.codes or ">>" not in text:
            return text
        return self._own_tags.sub("", text)

    @property
    def own_tags_pattern(self):
        """The regular expression (RE2's syntax too) of a tag of the model's
        languages and the spaces or tabs before it: what `untagged` removes,
        and the SavedModel's graph with it."""
        return r"[ \t]*(?:" + "|".join(re.escape(tag(c)) for c in self.codes) + ")"

    @property
    def _own_tags(self):
        return re.compile(self.own_tags_pattern)

    def tagged_texts(self, texts, target_lang):
        """`texts` each tagged with its language of `requested(texts,
        target_lang)` (bytes decoded as UTF-8 where a tag is written; a
        text without a language as it is)."""
        texts, codes = self.requested(texts, target_lang)
        return [
            self.tagged(text.decode("utf-8", errors="replace") if code and isinstance(text, bytes)
                        else text, code)
            for text, code in zip(texts, codes, strict=True)
        ]  # fmt: skip

    def requested(self, texts, target_lang):
        """Each of `texts`' language: `(texts, codes)`, `codes` one per text
        (`None` where the text is to be translated as it is).

        `target_lang` is a code for all the texts, a list of one per text,
        or `None`. With `None`, a text that starts with a tag of the model
        (typed, as OPUS-MT's users do) asks for that language and loses
        the tag, so that a text of several sentences asks for it in each;
        a text without one is refused where a tag is `required`, else
        translated as it is.

        Raises:
            ValueError: a language the model does not know (naming those
                it knows), a list of another length than `texts`, a
                language for a model of one language, or a text without
                one for a multilingual model.
        """
        texts = list(texts)
        if target_lang is None:
            return self._typed(texts)
        if isinstance(target_lang, str):
            codes = [target_lang] * len(texts)
        elif isinstance(target_lang, (list, tuple)):
            codes = list(target_lang)
            if len(codes) != len(texts):
                raise ValueError(
                    "`target_lang` must be one language, or a list of one per sentence. "
                    f"Received: {len(codes)} languages for {len(texts)} sentences"
                )
        else:
            raise ValueError(
                "`target_lang` must be a language code (a string), a list of one per "
                f"sentence, or None. Received: target_lang={target_lang!r}"
            )
        for code in dict.fromkeys(codes):
            self.check(code)
        return texts, codes

    def check(self, code):
        """Raises `ValueError` unless `code` is a language of the model."""
        if not self.codes:
            raise ValueError(
                "This model translates into one language and takes no `target_lang` (its "
                f"vocabulary has no language tags). Received: target_lang={code!r}"
            )
        if code not in self.codes:
            known = ", ".join(repr(c) for c in self.codes)
            raise ValueError(
                f"`target_lang` must be one of the languages this model knows: {known}. "
                f"Received: target_lang={code!r}"
            )

    def _typed(self, texts):
        """`requested` without a `target_lang`: the languages typed."""
        if not self.codes:
            return texts, [None] * len(texts)
        stripped, codes = [], []
        for text in texts:
            string = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
            match = _LEADING_TAG.match(string) if isinstance(string, str) else None
            if match is None and (not self.required or not string.strip()):
                stripped.append(text)  # (a text without characters translates to nothing)
                codes.append(None)
                continue
            if match is None:
                known = ", ".join(repr(c) for c in self.codes)
                raise ValueError(
                    "This model translates into several languages: pass `target_lang`, one of "
                    f"{known} (or start each text with its tag, such as "
                    f"{tag(self.codes[0])!r}). Received: target_lang=None for {text!r}"
                )
            self.check(match.group(1))
            stripped.append(self.untagged(string[match.end() :]).lstrip())
            codes.append(match.group(1))
        return stripped, codes

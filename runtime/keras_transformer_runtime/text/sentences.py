"""Sentences of a text, for sentence-level models: where a text splits,
and how its translations join back (without TensorFlow).

A text splits after sentence-final punctuation (`.`, `!`, `?`, `…`, and any
closing quotes or brackets after it, a space before each allowed as French
sets them) followed by spaces and an upper-case
letter or a digit (after any opening quotes), and at every line break. It
does not split after an abbreviation (`ABBREVIATIONS`), a single letter
(an initial: "J. Smith", "p. 5"), a letter after another's dot ("e.g.",
"U.S.", "z.B."), or a number of one or two digits (a German ordinal: "am
3. Oktober"); nor inside a word ("3.5", "example.com"), nor in scripts
without spaces between sentences.

`segments(text)` returns the sentences and what separates them,
alternately (`[sentence, separator, sentence, ...]`, an odd count), so that
joining them gives the text back; `joined` puts translations in their
sentences' places. The graph's splitter
(`keras_transformer.tokenization.sentences`) applies the same rules with
TensorFlow's regular expressions, and the tests hold both to one table of
cases.

Example:

>>> segments("Dr. Smith arrived. He sat down.\\nThen he left.")
['Dr. Smith arrived.', ' ', 'He sat down.', '\\n', 'Then he left.']
"""

import re
import unicodedata

# Words after which a period does not end a sentence (English, German,
# French titles and common abbreviations; case as written).
ABBREVIATIONS = (
    "Mr", "Mrs", "Ms", "Dr", "Prof", "Sr", "Jr", "St", "Mt", "Gen", "Col", "Lt", "Sgt",
    "Capt", "Gov", "Sen", "Rep", "Rev", "Hon", "vs", "Fig", "fig", "Vol", "vol", "pp",
    "approx", "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct",
    "Nov", "Dec", "bzw", "ca", "Nr", "Str", "Hr", "Fr", "Jh", "evtl", "ggf", "inkl",
    "vgl", "Mme", "Mlle", "Mgr", "av", "bd", "cf",
)  # fmt: skip
FINAL = ".!?\u2026"  # sentence-final punctuation
# What may follow it within the sentence (English, German and French
# closing quotes, brackets), and what may open the next sentence.
CLOSING = "\"'\u201d\u2019\u201c\u2018\u00bb\u00ab\u203a\u2039)]"
OPENING = "\"'\u201c\u2018\u201e\u201a\u00ab\u00bb\u2039\u203a(\u00bf\u00a1"
# Unicode noncharacters (reserved for a program's internal use, never in
# interchanged text): a period that ends no sentence, and a boundary.
KEPT_PERIOD = "\ufdd0"
BOUNDARY = "\ufdd1"

_ABBREVIATED = re.compile(r"(?<![^\W_])(" + "|".join(ABBREVIATIONS) + r")\.")
_SINGLE = re.compile(r"(?<![^\W_])(\w)\.")
_AFTER_DOT = re.compile(r"\.(\w)\.")
_ENDS = re.compile(
    f"([{re.escape(FINAL)}]+(?:[^\\S\\n]?[{re.escape(CLOSING)}])*)([^\\S\\n]+)"
    f"([{re.escape(OPENING)}]*)(\\w)"
)
_LINE_BREAKS = re.compile(r"([^\S\n]*\n\s*)")


def _is_letter(character):
    return unicodedata.category(character).startswith("L")


def _is_number(character):
    return unicodedata.category(character).startswith("N")


def _starts_sentence(character):
    return unicodedata.category(character) == "Lu" or _is_number(character)


def _kept(match, word_test):
    word = match.group(1)
    return f"{word}{KEPT_PERIOD}" if word_test(word) else match.group(0)


def _ordinal_or_abbreviation(text):
    """`text` with the periods that end no sentence as `KEPT_PERIOD`."""
    text = _AFTER_DOT.sub(
        lambda m: f".{m.group(1)}{KEPT_PERIOD}" if _is_letter(m.group(1)) else m.group(0), text
    )
    text = _SINGLE.sub(lambda m: _kept(m, _is_letter), text)
    text = _ABBREVIATED.sub(lambda m: f"{m.group(1)}{KEPT_PERIOD}", text)
    return re.sub(
        r"(?<![\w.])(\w{1,2})\.", lambda m: _kept(m, lambda w: all(map(_is_number, w))), text
    )


def segments(text):
    """`text`'s sentences and the separators between them, alternately:
    `[sentence, separator, ..., sentence]`; `"".join` of them is `text`.

    Example:

    >>> segments("It rains. \\"Stay,\\" she said.")
    ['It rains.', ' ', '"Stay," she said.']
    """
    if BOUNDARY in text or KEPT_PERIOD in text:  # noncharacters: no split
        return [text]
    marked = _ordinal_or_abbreviation(text)
    marked = _ENDS.sub(
        lambda m: (
            f"{m.group(1)}{BOUNDARY}{m.group(2)}{BOUNDARY}{m.group(3)}{m.group(4)}"
            if _starts_sentence(m.group(4))
            else m.group(0)
        ),
        marked,
    )
    marked = _LINE_BREAKS.sub(f"{BOUNDARY}\\1{BOUNDARY}", marked)
    return marked.replace(KEPT_PERIOD, ".").split(BOUNDARY)


def joined(translations, parts):
    """The text of `translations` (one per sentence of `parts`, which
    `segments` returned) with `parts`' separators between them.

    Example:

    >>> joined(["Es regnet.", "Bleib."], ["It rains.", "\\n", "Stay."])
    'Es regnet.\\nBleib.'
    """
    separators = parts[1::2]
    if len(translations) != len(separators) + 1:
        raise ValueError(
            f"`translations` must hold one translation per sentence ({len(separators) + 1}). "
            f"Received: {len(translations)}"
        )
    pieces = [translations[0]]
    for separator, translation in zip(separators, translations[1:], strict=True):
        pieces += [separator, translation]
    return "".join(pieces)

"""Glossaries: source terms and the target terms that must translate them.

A glossary file is tab-separated, one entry per line, `source
term<TAB>target term`; blank lines and lines starting with `#` are
skipped. For a sentence, every source term that occurs in it as whole
words (after Unicode NFKC normalization and case folding; the longest
term wins where terms overlap) gives its target term as a constraint of
the translation (`Translator.translate(..., constraints=...)`, the
`translate_with_constraints` signature, `translate --glossary FILE`).
"""

import re
import unicodedata
import warnings

from keras_transformer_runtime.text import files as text_files

# What separates phrases in the constraint strings of the serving signature.
PHRASE_SEPARATOR = "|||"
# How an export refuses constraints its target vocabulary cannot write
# (the phrases follow it in the error).
UNWRITABLE_CONSTRAINT = (
    "A constraint must be written with the target vocabulary; these hold characters it "
    "lacks (they would come out as unknown pieces, which translations drop):"
)


def phrase_lists(name, phrases, count):
    """`phrases` (the argument `name`: per sentence, a list of phrase
    strings, or `None`) as `count` lists, checked; `None` gives empty
    ones.

    Raises:
        ValueError: not one list per sentence, or a phrase that is not a
            string or holds `|||`.
    """
    if phrases is None:
        return [[] for _ in range(count)]
    phrases = [list(p) for p in phrases]
    if len(phrases) != count:
        raise ValueError(
            f"`{name}` must hold one list of phrases per sentence. Received: "
            f"{len(phrases)} lists for {count} sentences"
        )
    for sentence in phrases:
        for phrase in sentence:
            if not isinstance(phrase, str) or PHRASE_SEPARATOR in phrase:
                raise ValueError(
                    f"Each of `{name}` must be a string without {PHRASE_SEPARATOR!r}. "
                    f"Received: {phrase!r}"
                )
    return phrases


def joined(phrases):
    """A sentence's phrases as the one string the serving signature takes
    (joined by ` ||| `; `""` for none)."""
    return f" {PHRASE_SEPARATOR} ".join(phrases)


def split(field):
    """The phrases of a ` ||| `-joined string (`""`: none), stripped."""
    return [phrase.strip() for phrase in field.split(PHRASE_SEPARATOR)] if field.strip() else []


def holds(text, phrase):
    """Whether `text` holds `phrase` as whole words (neither follows nor
    is followed by a letter or digit of the same word).

    Example:

    >>> holds("Ein Hund.", "Hund"), holds("Hunde", "Hund")
    (True, False)
    """
    return re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text) is not None


def warn_unmet(hypotheses, stacklevel=2):
    """A `RuntimeWarning` naming the inputs whose translations (a
    `Hypothesis` each, of `translate_with_constraints`) do not meet every
    constraint, if any."""
    unmet = [i for i, h in enumerate(hypotheses) if not h.constraints_met]
    if unmet:
        warnings.warn(
            f"The length limit came before every constraint of {len(unmet)} sentence(s) "
            f"(sentences {unmet[:10]}): their translations meet as many as they could.",
            RuntimeWarning,
            stacklevel=stacklevel + 1,
        )


def _normalized(text):
    return unicodedata.normalize("NFKC", text).casefold()


class Glossary:
    """Source terms and their target terms.

    Args:
        entries: `(source term, target term)` pairs.

    Raises:
        ValueError: an empty term, a target term holding `|||`, or a
            source term given twice with different targets.

    Example:

    >>> glossary = Glossary([("contract", "Vertrag"), ("sales contract", "Kaufvertrag")])
    >>> glossary.constraints("The Sales Contract and the contract.")
    ['Kaufvertrag', 'Vertrag']
    """

    def __init__(self, entries):
        self.entries = {}
        self.path, self._lines = None, {}
        for source, target in entries:
            self._add(source, target)
        self._compile()

    def _add(self, source, target):
        """Adds one entry, checked (see the class's `Raises`)."""
        source, target = source.strip(), target.strip()
        if not source or not target:
            raise ValueError(
                "A glossary entry needs a source term and a target term. "
                f"Received: {source!r} -> {target!r}"
            )
        if PHRASE_SEPARATOR in target:
            raise ValueError(
                f"A target term may not hold {PHRASE_SEPARATOR!r}. Received: {target!r}"
            )
        key = _normalized(source)
        if self.entries.get(key, target) != target:
            raise ValueError(
                f"The source term {source!r} is given twice, with the targets "
                f"{self.entries[key]!r} and {target!r}."
            )
        self.entries[key] = target

    def _compile(self):
        # Longest first, so that a longer term wins over one inside it.
        terms = sorted(self.entries, key=len, reverse=True)
        self._pattern = (
            re.compile("|".join(rf"(?<!\w){re.escape(t)}(?!\w)" for t in terms)) if terms else None
        )

    @classmethod
    def from_tsv(cls, path):
        """The glossary in the tab-separated file `path` (plain or `.gz`,
        read as `text_files` reads text).

        Raises:
            ValueError: a line that is not `source<TAB>target`, an empty
                term, or a source term given again with another target,
                naming the file and the line (and the earlier line).
            UnicodeDecodeError: the file is not UTF-8.
        """
        glossary = cls([])
        first_lines = {}
        for number, line in enumerate(text_files.iter_lines(path), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 2:
                raise ValueError(
                    f"{path}:{number}: a glossary line is 'source<TAB>target'. "
                    f"Received: {len(fields) - 1} tabs in {line!r}"
                )
            key = _normalized(fields[0].strip())
            try:
                glossary._add(*fields)
            except ValueError as error:
                earlier = f" (first given on line {first_lines[key]})" if key in first_lines else ""
                raise ValueError(f"{path}:{number}: {error}{earlier}") from None
            first_lines.setdefault(key, number)
            glossary._lines.setdefault(fields[1].strip(), number)
        glossary.path = path
        glossary._compile()
        return glossary

    def where(self, target):
        """Where the target term `target` was read: `"FILE:LINE"`, or
        `None` for a glossary not read from a file."""
        number = self._lines.get(target)
        return None if number is None else f"{self.path}:{number}"

    def __len__(self):
        return len(self.entries)

    def constraints(self, sentence):
        """The target terms of the source terms in `sentence`, in order of
        appearance, each once."""
        if self._pattern is None:
            return []
        found = []
        for match in self._pattern.finditer(_normalized(sentence)):
            target = self.entries[match.group(0)]
            if target not in found:
                found.append(target)
        return found

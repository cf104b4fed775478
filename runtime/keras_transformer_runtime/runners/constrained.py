"""Constraints over inputs of several sentences: which sentence of an input
is searched with which of the input's phrases
(`Runner.translate_with_constraints`)."""

from keras_transformer_runtime.runners.results import RefusedRequestError
from keras_transformer_runtime.text import glossary as glossary_module


class SentenceConstraints:
    """Translates the sentences of a `Split` under their inputs' terms.

    Every sentence is searched first, those of an input of several
    without the input's constraints (a phrase belongs to one of them, not
    to each); then each constraint none of them holds is given to the
    input's longest sentence, searched again with it. Banned phrases are
    banned in every sentence; a `glossary` adds each sentence's matched
    target terms after its input's own constraints.

    Args:
        split: the inputs' `Split`.
        terms: `{"constraints": [...], "banned": [...]}`, a list of
            phrases per input.
        glossary: a `Glossary`, or `None`.
        search: `search(sentences, constraints, banned)`: a `Hypothesis`
            per sentence (the runner's `_translate_with_constraints`).
    """

    def __init__(self, split, terms, glossary, search):
        self.split, self.terms, self.glossary, self.search = split, terms, glossary, search
        self.rows = split.rows()
        self.several = {row for row in range(len(split.layouts)) if len(split.units(row)) > 1}
        self.banned = [terms["banned"][row] for row in self.rows]

    def __call__(self, part):
        """A `Hypothesis` for each sentence of `part` (the split's
        sentences, or the first of them)."""
        constraints = self.terms["constraints"]
        first = [[] if row in self.several else constraints[row] for row in self.rows]
        if self.glossary is not None:
            for index, sentence in enumerate(part):
                if isinstance(sentence, bytes):
                    sentence = sentence.decode("utf-8", errors="replace")
                matched = self.glossary.constraints(sentence)
                first[index] = first[index] + [t for t in matched if t not in first[index]]
        found = self.search(part, first, self.banned)
        again = {}
        for row in sorted(self.several):
            units = self.split.units(row)
            missing = [
                phrase
                for phrase in constraints[row]
                if not any(glossary_module.holds(found[u].translation, phrase) for u in units)
            ]
            if missing:
                longest = max(units, key=lambda u: len(part[u]))
                again[longest] = first[longest] + missing
        if not again:
            return found
        units = list(again)  # in order
        try:
            redone = self.search(
                [part[u] for u in units], list(again.values()), [self.banned[u] for u in units]
            )
        except RefusedRequestError as error:  # named by its sentence
            found = _redone(found, units, error.done)
            unit = units[error.start]
            raise RefusedRequestError(error.reason, unit, unit + 1, found[:unit]) from None
        return _redone(found, units, redone)


def _redone(found, units, hypotheses):
    """`found` with the hypotheses of `units` (in order; as many as there
    are `hypotheses`) replaced by them."""
    found = list(found)
    for unit, hypothesis in zip(units, hypotheses, strict=False):
        found[unit] = hypothesis
    return found

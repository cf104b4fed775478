"""Documents for sentence-level models: every runner splits each input
into its sentences (`sentences.segments`), translates them in one batch
with every other input's (sorted by length with the rest), and joins
their translations back with the input's own separators.

A sentence longer than the model takes (`max_input_length` tokens, EOS
included) is translated in pieces: each the most whole words from where
the last ended that fit the limit, the pieces' translations joined by a
space. A single word longer than the limit is cut to it (the rest of the
word is not translated). `Split.warn` names the inputs either happened
to, in a `RuntimeWarning`.

A joined result is its sentences': the translation their translations
with the input's separators, the score and log-probability their sums,
the tokens and token scores theirs in order (each sentence's ending with
EOS), alignments offset to the source tokens of the whole input. An input
of one sentence gives exactly that sentence's result; an empty sentence
of an input of several (a text that starts or ends with a line break)
stays empty, untranslated.

Example:

>>> split = Split.of(["It rains. Stay.", "Go"])
>>> split.sentences
['It rains.', 'Stay.', 'Go']
>>> split.texts(["Es regnet.", "Bleib.", "Geh"])
['Es regnet. Bleib.', 'Geh']
"""

import dataclasses
import re
import warnings

from keras_transformer_runtime.runners.results import AlignedTranslation
from keras_transformer_runtime.runners.results import Hypothesis
from keras_transformer_runtime.text import sentences as rules

PIECE_SEPARATOR = " "  # between the translations of a long sentence's pieces
# What separates a long sentence's words: ASCII whitespace, as TensorFlow's
# `tf.strings.split` splits (the graph cuts the same pieces).
WHITESPACE = " \t\n\v\f\r"
_WORD_BREAKS = re.compile(f"[{WHITESPACE}]+")


def words_of(sentence):
    """A sentence's words, split at runs of `WHITESPACE`."""
    return [word for word in _WORD_BREAKS.split(sentence) if word]


def word_pieces(counts, max_tokens):
    """A long sentence's pieces: `(start, end)` ranges of its words (their
    token `counts`), each the most words from where the last ended whose
    tokens sum to at most `max_tokens`; a word over it alone is a range of
    its own.

    Example:

    >>> word_pieces([2, 2, 3, 1, 9, 1], 5)
    [(0, 2), (2, 4), (4, 5), (5, 6)]
    """
    pieces, start, total = [], 0, 0
    for end, count in enumerate(counts):
        if end > start and total + count > max_tokens:
            pieces.append((start, end))
            start, total = end, 0
        total += count
    pieces.append((start, len(counts)))
    return pieces


@dataclasses.dataclass(frozen=True)
class Split:
    """Inputs split into what a runner translates, and how to join its
    results back (see the module's docstring).

    Attributes:
        sentences: what the runner translates, every input's in order.
        layouts: per input, its parts in order: an int is the index in
            `sentences` of a part to translate, a string is kept as it
            is (a separator, an empty sentence).
        in_pieces: the inputs with a sentence translated in pieces.
        cut: the inputs with a word cut to the limit.
    """

    sentences: list
    layouts: list
    in_pieces: list = dataclasses.field(default_factory=list)
    cut: list = dataclasses.field(default_factory=list)

    @classmethod
    def of(cls, texts, by_sentence=True, max_tokens=None, lengths=None):
        """`texts` split.

        Args:
            texts: the inputs (strings, or bytes: decoded as UTF-8 with
                invalid bytes replaced where they are split; an input that
                is one sentence is passed on as it is).
            by_sentence: split into sentences (`False`: each input is one).
            max_tokens: the most source tokens a sentence may have, EOS not
                counted (`None`: no limit).
            lengths: `lengths(strings)`, each string's source tokens (EOS
                not counted); needed with `max_tokens`.
        """
        texts = list(texts)
        parts = [_parts(text, by_sentence) for text in texts]
        units = [(row, i) for row, text_parts in enumerate(parts) for i in _units(text_parts)]
        long = {}
        if max_tokens is not None:
            counts = lengths([_text(parts[row][i]) for row, i in units])
            long = {
                unit: words_of(_text(parts[unit[0]][unit[1]]))
                for unit, count in zip(units, counts, strict=True)
                if count > max_tokens
            }
        word_counts = iter(lengths([w for words in long.values() for w in words]) if long else [])
        translated = set(units)
        sentences, layouts, in_pieces, cut = [], [[] for _ in texts], set(), set()
        for row, text_parts in enumerate(parts):
            for i, part in enumerate(text_parts):
                if (row, i) not in translated:  # a separator or an empty sentence
                    layouts[row].append(_text(part))
                    continue
                if (row, i) not in long:
                    layouts[row].append(len(sentences))
                    sentences.append(part)
                    continue
                words = long[(row, i)]
                counts = [next(word_counts) for _ in words]
                in_pieces.add(row)
                cut.update([row] if max(counts) > max_tokens else [])
                for number, (start, end) in enumerate(word_pieces(counts, max_tokens)):
                    layouts[row] += [PIECE_SEPARATOR] if number else []
                    layouts[row].append(len(sentences))
                    sentences.append(" ".join(words[start:end]))
        return cls(sentences, layouts, sorted(in_pieces), sorted(cut))

    def units(self, row):
        """The indices in `sentences` of input `row`'s parts, in order."""
        return [part for part in self.layouts[row] if isinstance(part, int)]

    def rows(self):
        """The input each of `sentences` belongs to."""
        return [row for row in range(len(self.layouts)) for _ in self.units(row)]

    def texts(self, translations):
        """The inputs' translations: `translations` (one per sentence) with
        the inputs' separators."""
        return [
            "".join(translations[p] if isinstance(p, int) else p for p in layout)
            for layout in self.layouts
        ]

    def hypotheses(self, options, count):
        """Per input, `count` joined `Hypothesis` from `options` (per
        sentence, a list of them, best first): the i-th joins each
        sentence's i-th (its last, where it has fewer). An input of one
        sentence keeps its list as it is; one with nothing to translate
        gets its separators, scored 0."""

        def join(layout, units):
            number = min((len(options[u]) for u in units), default=count)
            return [
                _joined([options[u][min(k, len(options[u]) - 1)] for u in units], layout, units)
                for k in range(number)
            ]

        joined = self._per_input(options, join)
        for row in set(self.in_pieces):  # said on each of its hypotheses
            joined[row] = [dataclasses.replace(h, truncated=True) for h in joined[row]]
        return joined

    def aligned(self, translations):
        """Per input, an `AlignedTranslation` joining its sentences': their
        tokens in order, each alignment offset by the source tokens of the
        sentences before it."""
        return self._per_input(
            translations,
            lambda layout, units: _aligned([translations[u] for u in units], layout, units),
        )

    def _per_input(self, values, join):
        """Per input, its one sentence's entry of `values` as it is, else
        `join(layout, units)`."""
        joined = []
        for row, layout in enumerate(self.layouts):
            units = self.units(row)
            alone = bool(units) and layout == units[:1]
            joined.append(values[units[0]] if alone else join(layout, units))
        return joined

    def head(self, rows):
        """The split of the first `rows` inputs only (their sentences are
        the first of `sentences`)."""
        layouts = self.layouts[:rows]
        count = sum(isinstance(p, int) for layout in layouts for p in layout)
        in_pieces = [row for row in self.in_pieces if row < rows]
        return Split(self.sentences[:count], layouts, in_pieces, [r for r in self.cut if r < rows])

    def row_of(self, index):
        """The input that sentence `index` belongs to."""
        return self.rows()[index]

    def warn(self, limit, stacklevel=2):
        """A `LongInputWarning` naming the inputs with a sentence over
        `limit` (the `max_input_length`), if any."""
        if self.in_pieces:
            warnings.warn(
                LongInputWarning(self.in_pieces, self.cut, limit), stacklevel=stacklevel + 1
            )


class LongInputWarning(RuntimeWarning):
    """Inputs had a sentence longer than `max_input_length`: translated in
    pieces of whole words, a word alone over it cut.

    Attributes:
        inputs: the 0-based indices of those inputs.
        cut: those of them with a word alone over the limit.
        limit: the `max_input_length` (tokens, EOS included).
    """

    def __init__(self, inputs, cut, limit):
        self.inputs, self.cut, self.limit = list(inputs), list(cut), limit
        message = (
            f"{len(self.inputs)} input(s) had a sentence longer than max_input_length "
            f"({limit} tokens, EOS included): translated in pieces of whole words "
            f"(inputs {self.inputs[:10]})."
        )
        if self.cut:
            message += (
                f" In {len(self.cut)} of them a word alone was longer: cut to the limit, "
                f"its rest not translated (inputs {self.cut[:10]})."
            )
        super().__init__(message)


def _text(part):
    return part.decode("utf-8", errors="replace") if isinstance(part, bytes) else part


def _parts(text, by_sentence):
    """`text`'s sentences and separators: the text as it is if it is one."""
    parts = rules.segments(_text(text)) if by_sentence else [text]
    return [text] if len(parts) == 1 else parts


def _units(parts):
    """The positions in `parts` of the sentences to translate: every
    sentence of one, the non-empty ones of several."""
    if len(parts) == 1:
        return [0]
    return [i for i in range(0, len(parts), 2) if parts[i]]


def _layout_text(layout, units, translations):
    by_unit = dict(zip(units, translations, strict=True))
    return "".join(by_unit[p] if isinstance(p, int) else p for p in layout)


def _joined(hypotheses, layout, units):
    """One `Hypothesis` of an input's sentences' (see the module's
    docstring)."""
    known = [h.log_prob for h in hypotheses]
    tokens = [h.tokens for h in hypotheses]
    met = [h.constraints_met for h in hypotheses if h.constraints_met is not None]
    return Hypothesis(
        translation=_layout_text(layout, units, [h.translation for h in hypotheses]),
        score=float(sum(h.score for h in hypotheses)),
        log_prob=None if None in known else float(sum(known)),
        tokens=None if None in tokens else [t for row in tokens for t in row],
        token_scores=(
            [s for h in hypotheses for s in h.token_scores]
            if all(h.token_scores for h in hypotheses)
            else []
        ),
        constraints_met=all(met) if met else None,
    )


def _aligned(parts, layout, units):
    """One `AlignedTranslation` of an input's sentences' `parts`."""
    offsets, total = [], 0
    for part in parts:
        offsets.append(total)
        total += len(part.source_tokens)
    return AlignedTranslation(
        translation=_layout_text(layout, units, [p.translation for p in parts]),
        target_tokens=[t for p in parts for t in p.target_tokens],
        source_tokens=[t for p in parts for t in p.source_tokens],
        alignments=[a + o for p, o in zip(parts, offsets, strict=True) for a in p.alignments],
        token_scores=[s for p in parts for s in p.token_scores],
        attention=(
            [
                [0.0] * o + row + [0.0] * (total - o - len(row))
                for p, o in zip(parts, offsets, strict=True)
                for row in p.attention
            ]
            if all(p.attention for p in parts)
            else []
        ),
    )

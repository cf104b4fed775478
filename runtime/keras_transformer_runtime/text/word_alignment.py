"""Word alignments from token alignments: which source word (`words.WORD`)
each word of a translation is aligned to, from a runner's
`AlignedTranslation` (for each target piece, its most attended source
piece).

A piece is placed in its text by its characters other than whitespace:
SentencePiece's word boundary `▁` is a space, a run of byte pieces
(`<0xC3><0xA9>`) is the characters it decodes to, and control pieces (EOS,
a language tag `>>de<<`, `<unk>`) hold none. The n-th such character of
the pieces is the n-th of the text as SentencePiece's NFKC normalization
writes it, a word at a time (`ﬁ` as `fi`, `…` as `...`). Where the
counts still differ (another normalization), the positions are scaled from
one count to the other, so a word is still matched to the pieces at its
place.

Where the runner gives the whole attention (`AlignedTranslation.attention`),
a source piece stands for the word its first character is in, the
attention of a target word's pieces on a source word's is summed, and the
words are matched on those sums (`attention_matching`: balanced, with a
position prior, one to one). Otherwise (the argmax only), a target word is
aligned to the source word most of the pieces it is written in are aligned
to (the first of them on a tie). Either way, a word whose pieces all
attend to a control piece (EOS) is aligned to none.

Example:

>>> from keras_transformer_runtime.runners.results import AlignedTranslation
>>> aligned = AlignedTranslation(
...     translation="Ein kleines Mädchen.",
...     target_tokens=["▁Ein", "▁klein", "es", "▁Mädchen", ".", "</s>"],
...     source_tokens=["▁A", "▁little", "▁girl", ".", "</s>"],
...     alignments=[0, 1, 1, 2, 3, 4],
... )
>>> word_alignment(aligned, "A little girl.")
[0, 1, 2, 3]
"""

import re
import unicodedata

import numpy as np

from keras_transformer_runtime.runners.results import BYTE_PIECE
from keras_transformer_runtime.runners.results import WORD_BOUNDARY
from keras_transformer_runtime.text.attention_matching import matched_alignment
from keras_transformer_runtime.text.languages import TAG
from keras_transformer_runtime.text.words import WORD

# A piece that stands for no text: `</s>`, `<unk>`, `<pad>`, and the like.
CONTROL = re.compile(r"<[^<>\s]+>")


def word_alignment(aligned, source_text):
    """For each word of `aligned.translation`, the index of the word of
    `source_text` (the text that was translated) it is aligned to, or
    `None` (see the module's docstring).

    Args:
        aligned: an `AlignedTranslation` of `source_text`.
        source_text: the source, as it was given to the runner.

    Returns:
        A list with one entry per `WORD` of the translation: what
        `markup.TaggedText.placed` takes.
    """
    source_words = _words_at(aligned.source_tokens, source_text)
    target_words = _words_at(aligned.target_tokens, aligned.translation)
    count = sum(1 for _ in WORD.finditer(aligned.translation))
    if aligned.attention:
        return _matched(aligned, source_words, target_words, count)
    votes = {}  # target word -> {source word: count}, in order of pieces
    for target_piece, source_piece in enumerate(aligned.alignments):
        if not 0 <= source_piece < len(source_words) or not source_words[source_piece]:
            continue
        source_word = source_words[source_piece][0]
        for target_word in target_words[target_piece]:
            counts = votes.setdefault(target_word, {})
            counts[source_word] = counts.get(source_word, 0) + 1
    alignment = [None] * count
    for target_word, counts in votes.items():
        best = max(counts.values())
        alignment[target_word] = next(w for w, c in counts.items() if c == best)
    return alignment


def _matched(aligned, source_words, target_words, count):
    """The alignment of `count` target words matched on the pieces'
    `aligned.attention` summed by word (a source piece counting for the
    word its first character is in; pieces of no word left out, and so the
    target pieces whose argmax is one)."""
    columns = max((words[0] + 1 for words in source_words if words), default=0)
    attention = np.asarray(aligned.attention, dtype=np.float64)
    attention = attention[: len(target_words), : len(source_words)]
    by_target = np.zeros((count, len(attention)))  # target word x target piece
    for piece, most in enumerate(aligned.alignments[: len(attention)]):
        if 0 <= most < len(source_words) and source_words[most]:
            by_target[list(target_words[piece]), piece] = 1.0
    by_source = np.zeros((attention.shape[1], columns))  # source piece x source word
    for piece, words in enumerate(source_words[: attention.shape[1]]):
        if words:
            by_source[piece, words[0]] = 1.0
    return matched_alignment(by_target @ attention @ by_source)


def _widths(pieces):
    """How many characters other than whitespace each piece writes."""
    widths, pending = [], []
    for piece in pieces:
        if BYTE_PIECE.fullmatch(piece):  # a run's characters go to its first piece
            pending.append(len(widths))
            widths.append(0)
            continue
        _flush(pieces, widths, pending)
        if CONTROL.fullmatch(piece) or TAG.fullmatch(piece):
            widths.append(0)
        else:
            widths.append(sum(1 for c in piece.replace(WORD_BOUNDARY, " ") if not c.isspace()))
    _flush(pieces, widths, pending)
    return widths


def _flush(pieces, widths, pending):
    """Gives a finished run of byte pieces the characters it decodes to."""
    if pending:
        data = bytes(int(BYTE_PIECE.fullmatch(pieces[i]).group(1), 16) for i in pending)
        text = data.decode("utf-8", errors="replace")
        widths[pending[0]] = sum(1 for c in text if not c.isspace())
        pending.clear()


def _words_at(pieces, text):
    """For each piece, the indices of the `WORD`s of `text` its characters
    fall in (scaled where the counts differ): a `range`, empty for a piece
    that writes none."""
    owner = []  # for each character of `text` other than whitespace, its word
    # Written as the tokenizer's NFKC writes it, a word at a time (a word
    # holds its combining marks, so what NFKC composes stays in one).
    for index, match in enumerate(WORD.finditer(text)):
        written = unicodedata.normalize("NFKC", match.group())
        owner.extend([index] * sum(1 for c in written if not c.isspace()))
    widths = _widths(pieces)
    total = sum(widths)

    def at(position):
        scaled = position if total == len(owner) else position * len(owner) // total
        return owner[min(scaled, len(owner) - 1)]

    words, position = [], 0
    for width in widths:
        if width == 0 or not owner:
            words.append(range(0))
        else:
            words.append(range(at(position), at(position + width - 1) + 1))
        position += width
    return words

"""What translators return, and the length penalty their scores use."""

import dataclasses


def length_penalty(length, alpha):
    """GNMT's length penalty `((5 + length) / 6) ** alpha` (Wu et al.,
    2016), by which the searches rank hypotheses: a score is `log_prob /
    length_penalty(len(tokens), alpha)`, EOS counted. `length` may be a
    number or a float tensor of any framework.

    Example:

    >>> round(length_penalty(7, 0.6), 4)
    1.1161
    """
    return ((5.0 + length) / 6.0) ** alpha


@dataclasses.dataclass(frozen=True)
class TargetScore:
    """How likely a translator's model finds one given target for its
    source (`score`).

    Attributes:
        log_prob: the sum of the log-probabilities of the target's tokens,
            EOS included.
        score: `log_prob / length_penalty(len(tokens), alpha)`, the score
            the searches rank by and `translate_with_scores` reports.
        tokens: the target's SentencePiece pieces, ending with EOS's.
        token_scores: the log-probability of each piece given the source
            and the pieces before it.
    """

    log_prob: float
    score: float
    tokens: list
    token_scores: list


@dataclasses.dataclass(frozen=True)
class Hypothesis:
    """One output of a search (`CTranslate2Translator.translate_with_scores`).

    Attributes:
        translation: the detokenized text.
        score: `log_prob / length_penalty(len(tokens), alpha)`.
        log_prob: the sum of the tokens' log-probabilities, EOS included.
        tokens: the SentencePiece pieces, ending with EOS's (added and
            scored where the length limit stopped the hypothesis, as the
            searches of `keras_transformer` do).
        token_scores: each token's log-probability given the source and
            the tokens before it, where asked for
            (`CTranslate2Translator.translate_with_scores(...,
            token_scores=True)`), else empty.
    """

    translation: str
    score: float
    log_prob: float
    tokens: list
    token_scores: list = dataclasses.field(default_factory=list)

    @property
    def word_scores(self):
        """`[(word, log_prob)]` from `token_scores` (`word_scores`)."""
        return word_scores(self.tokens, self.token_scores)


WORD_BOUNDARY = "\u2581"


def word_scores(tokens, token_scores):
    """The words of an output and their log-probabilities: `[(word,
    log_prob)]`, a word being a run of pieces that starts where a piece
    starts with SentencePiece's word boundary `▁` (or at the first piece),
    its log-probability the sum of its pieces' (the probability of the
    whole word, given the source and the words before it). The last token
    (EOS) belongs to no word.

    Example:

    >>> word_scores(["▁Ein", "▁Hund", ".", "</s>"], [-0.1, -0.5, -0.2, -0.05])
    [('Ein', -0.1), ('Hund.', -0.7)]
    """
    words = []
    for piece, score in zip(tokens[:-1], token_scores[:-1], strict=True):
        if piece.startswith(WORD_BOUNDARY) or not words:
            words.append([piece.lstrip(WORD_BOUNDARY), float(score)])
        else:
            words[-1][0] += piece
            words[-1][1] += float(score)
    return [(word, score) for word, score in words]


@dataclasses.dataclass(frozen=True)
class AlignedTranslation:
    """A translation with, for each of its tokens, the source token it
    attends to most and the token's log-probability
    (`Translator.translate(..., return_alignments=True)`).

    Attributes:
        translation: the translated text.
        target_tokens: its SentencePiece pieces, EOS's last.
        source_tokens: the source's pieces, EOS's last.
        alignments: for each target token, the index in `source_tokens` of
            its most attended source token.
        token_scores: for each target token, its log-probability given the
            source and the tokens before it (the model's, as
            `Translator.score` gives it for this translation); they sum to
            the translation's log-probability.
    """

    translation: str
    target_tokens: list
    source_tokens: list
    alignments: list
    token_scores: list = dataclasses.field(default_factory=list)

    @property
    def word_scores(self):
        """`[(word, log_prob)]`: `token_scores` summed over each word's
        pieces (`word_scores`); a low one marks a word to check."""
        return word_scores(self.target_tokens, self.token_scores)

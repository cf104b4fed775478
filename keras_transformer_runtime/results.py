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
    """

    translation: str
    score: float
    log_prob: float
    tokens: list


@dataclasses.dataclass(frozen=True)
class AlignedTranslation:
    """A translation with, for each of its tokens, the source token it
    attends to most (`Translator.translate(..., return_alignments=True)`).

    Attributes:
        translation: the translated text.
        target_tokens: its SentencePiece pieces, EOS's last.
        source_tokens: the source's pieces, EOS's last.
        alignments: for each target token, the index in `source_tokens` of
            its most attended source token.
    """

    translation: str
    target_tokens: list
    source_tokens: list
    alignments: list

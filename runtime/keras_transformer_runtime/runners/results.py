"""What translators return, the length penalty their scores use, and the
parsers of a SavedModel's signature outputs into them (NumPy arrays in:
`Translator` and `SavedModelTranslator` call the signatures, these read
what comes out)."""

import dataclasses
import re


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
    """One output of a search (`translate_with_scores`, `sample`,
    `translate_with_constraints` of every translator).

    Attributes:
        translation: the detokenized text.
        score: `log_prob / length_penalty(len(tokens), alpha)`.
        log_prob: the sum of the tokens' log-probabilities, EOS included
            (`None` where the runner's output does not give it: a
            SavedModel's search signatures return text and score only).
        tokens: the SentencePiece pieces, ending with EOS's (added and
            scored where the length limit stopped the hypothesis, as the
            searches of `keras_transformer` do); `None` where the runner's
            output does not give them.
        token_scores: each token's log-probability given the source and
            the tokens before it, where asked for
            (`translate_with_scores(..., token_scores=True)`), else empty:
            the scores of the pieces the search wrote (`tokens`), which
            sum to `log_prob`. `score` of `translation` scores the
            tokenizer's segmentation of the text: the same numbers where
            its `TargetScore.tokens` are these `tokens`, others where the
            search wrote the text in other pieces.
        constraints_met: from `translate_with_constraints`, whether the
            translation holds every constraint (false where the length
            limit came first); `None` from the other searches.
        truncated: whether a sentence of the input was longer than the
            runner's `max_input_length` and translated in pieces of whole
            words (a word alone longer than the limit cut to it), as the
            SavedModel's `truncated` output says.
    """

    translation: str
    score: float
    log_prob: float | None = None
    tokens: list | None = None
    token_scores: list = dataclasses.field(default_factory=list)
    constraints_met: bool | None = None
    truncated: bool = False

    @property
    def word_scores(self):
        """`[(word, log_prob)]` from `token_scores` (`word_scores`); empty
        without token scores."""
        if not self.token_scores:
            return []
        return word_scores(self.tokens, self.token_scores)


class RefusedRequestError(ValueError):
    """A SavedModel refused a request: a sentence (or pair) that alone
    exceeds one of its request limits (`max_input_tokens`).

    Attributes:
        reason: the limit, as the export states it.
        start, end: the refused items, `start` to `end` (0-based, `end`
            excluded): one item, unless the export's limits changed.
        done: the results of the items before `start`, in order (they
            were translated and can be kept).
    """

    def __init__(self, reason, start, end, done):
        self.reason, self.start, self.end, self.done = reason, start, end, done
        super().__init__(f"The export refuses {self.where('item')}: {reason}")

    def with_done(self, done):
        """This refusal with `done` as its results: those of the same items
        in another form (a document's translation for its hypotheses)."""
        return RefusedRequestError(self.reason, self.start, self.end, done)

    def where(self, noun):
        """The refused items named by `noun`, 1-based: `"line 4"`, `"lines 4-5"`."""
        if self.end - self.start == 1:
            return f"{noun} {self.start + 1}"
        return f"{noun}s {self.start + 1}-{self.end}"


WORD_BOUNDARY = "\u2581"


BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def word_scores(tokens, token_scores):
    """The words of an output and their log-probabilities: `[(word,
    log_prob)]`, the words of the detokenized text (split at spaces,
    punctuation kept with its word), a word being a run of pieces that
    starts where a piece starts with SentencePiece's word boundary `▁` (or
    at the first piece), byte pieces (`<0xC3>`, byte fallback) decoded as
    the detokenizer decodes them; its log-probability is the sum of its
    pieces' (the probability of the whole word, given the source and the
    words before it). The last token (EOS) belongs to no word; in the
    tokens of a text of several sentences (`documents`), each sentence's
    EOS ends a word and belongs to none.

    Example:

    >>> word_scores(["▁Ein", "▁Hund", ".", "</s>"], [-0.1, -0.5, -0.2, -0.05])
    [('Ein', -0.1), ('Hund.', -0.7)]
    >>> word_scores(["▁Caf", "<0xC3>", "<0xA9>", "</s>"], [-1.0, -0.5, -0.25, 0.0])
    [('Café', -1.75)]
    """
    words = []  # [pieces, log_prob]
    after_eos = True
    for piece, score in zip(tokens[:-1], token_scores[:-1], strict=True):
        if piece == tokens[-1]:  # the EOS of a sentence before the last
            after_eos = True
            continue
        if piece.startswith(WORD_BOUNDARY) or after_eos:
            after_eos = False
            words.append([[piece.lstrip(WORD_BOUNDARY)], float(score)])
        else:
            words[-1][0].append(piece)
            words[-1][1] += float(score)
    return [(_decoded(pieces), score) for pieces, score in words]


def _decoded(pieces):
    """The text of a word's pieces, runs of byte pieces decoded as UTF-8
    (an invalid run as U+FFFD, as the detokenizer writes it)."""
    text, pending = [], bytearray()
    for piece in pieces:
        byte = BYTE_PIECE.fullmatch(piece)
        if byte:
            pending.append(int(byte.group(1), 16))
            continue
        text.append(pending.decode("utf-8", "replace"))
        pending.clear()
        text.append(piece)
    text.append(pending.decode("utf-8", "replace"))
    return "".join(text)


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
        attention: for each target token, its attention on each of
            `source_tokens` (the alignment heads' mean, as `alignments`
            takes its argmax), or empty where the runner gives the argmax
            only (an export from before this field); `word_alignment`
            matches words on it.
    """

    translation: str
    target_tokens: list
    source_tokens: list
    alignments: list
    token_scores: list = dataclasses.field(default_factory=list)
    attention: list = dataclasses.field(default_factory=list)

    @property
    def word_scores(self):
        """`[(word, log_prob)]`: `token_scores` summed over each word's
        pieces (`word_scores`); a low one marks a word to check."""
        return word_scores(self.target_tokens, self.token_scores)


def numpy_outputs(outputs):
    """A signature's outputs (tensors by name) as NumPy arrays by name."""
    return {key: value.numpy() for key, value in outputs.items()}


def scores_signature(n_best, token_scores):
    """`(signature name, parser)`: the SavedModel signature that answers
    `translate_with_scores(n_best=, token_scores=)` and the parser of its
    outputs (`translate_with_alignments` for token scores, else
    `serving_default` or `n_best`).

    Raises:
        ValueError: `token_scores` with `n_best` above 1 (the signature
            gives the best translation's token scores only).
    """
    if token_scores and n_best != 1:
        raise ValueError(
            "`token_scores` gives the best translation's token scores: it goes with "
            f"n_best=1. Received: n_best={n_best}"
        )
    if token_scores:
        return "translate_with_alignments", scored_hypotheses
    if n_best == 1:
        return "serving_default", best_hypotheses
    return "n_best", lambda outputs: n_best_hypotheses(outputs, n_best)


def text(value):
    """A signature's string output as text (invalid UTF-8 replaced)."""
    return value.decode("utf-8", errors="replace")


def _length(tokens):
    """How many of a row of pieces are pieces (`""` pads the row)."""
    return int((tokens != b"").sum())


def best_hypotheses(outputs):
    """`serving_default`'s, `sample`'s or `translate_with_options`'
    outputs (`{"translation", "score"}`) as one `Hypothesis` per sentence,
    each in a list (`translate_with_scores`' shape)."""
    return [
        [Hypothesis(translation=text(t), score=float(s))]
        for t, s in zip(outputs["translation"], outputs["score"], strict=True)
    ]


def n_best_hypotheses(outputs, n_best):
    """`n_best`'s outputs (`{"translations", "scores"}`, best first) as the
    `n_best` best `Hypothesis` of each sentence."""
    return [
        [Hypothesis(translation=text(t), score=float(s)) for t, s in zip(ts, ss, strict=True)][
            :n_best
        ]
        for ts, ss in zip(outputs["translations"], outputs["scores"], strict=True)
    ]


def constrained_hypotheses(outputs):
    """`translate_with_constraints`' outputs as one `Hypothesis` per
    sentence, with `constraints_met`."""
    return [
        Hypothesis(translation=text(t), score=float(s), constraints_met=bool(met))
        for t, s, met in zip(
            outputs["translation"], outputs["score"], outputs["constraints_met"], strict=True
        )
    ]


def target_scores(outputs):
    """`score`'s outputs as `TargetScore`s, one per pair."""
    results = []
    for row, tokens in enumerate(outputs["target_tokens"]):
        length = _length(tokens)
        results.append(
            TargetScore(
                log_prob=float(outputs["log_prob"][row]),
                score=float(outputs["score"][row]),
                tokens=[text(piece) for piece in tokens[:length]],
                token_scores=outputs["token_scores"][row, :length].tolist(),
            )
        )
    return results


def aligned_translations(outputs):
    """`translate_with_alignments`' outputs as `AlignedTranslation`s (with
    their `attention` where the graph gives it: exports from before it
    give the argmax only)."""
    results = []
    attention = outputs.get("attention")
    for row, translation in enumerate(outputs["translation"]):
        length = _length(outputs["target_tokens"][row])
        source_length = _length(outputs["source_tokens"][row])
        results.append(
            AlignedTranslation(
                translation=text(translation),
                target_tokens=[text(p) for p in outputs["target_tokens"][row, :length]],
                source_tokens=[text(p) for p in outputs["source_tokens"][row, :source_length]],
                alignments=outputs["alignments"][row, :length].tolist(),
                token_scores=outputs["token_scores"][row, :length].tolist(),
                attention=(
                    [] if attention is None else attention[row, :length, :source_length].tolist()
                ),
            )
        )
    return results


def scored_hypotheses(outputs):
    """`translate_with_alignments`' outputs as one `Hypothesis` per
    sentence with its tokens and their log-probabilities, each in a list
    (`translate_with_scores(..., token_scores=True)`)."""
    return [
        [
            Hypothesis(
                translation=aligned.translation,
                score=float(score),
                log_prob=float(sum(aligned.token_scores)),
                tokens=aligned.target_tokens,
                token_scores=aligned.token_scores,
            )
        ]
        for aligned, score in zip(aligned_translations(outputs), outputs["score"], strict=True)
    ]

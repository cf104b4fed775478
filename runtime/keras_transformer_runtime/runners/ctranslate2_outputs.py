"""CTranslate2's search results as our hypotheses: the output limit and
controls of a call, EOS where the limit stopped a hypothesis, never PAD or
BOS, every score the model's log-probability, ranked by GNMT's penalty."""

import warnings

from keras_transformer_runtime.runners.results import AlignedTranslation
from keras_transformer_runtime.runners.results import Hypothesis
from keras_transformer_runtime.runners.results import length_penalty


def decoding_limit(pieces, settings):
    """The most tokens CTranslate2 may generate for a batch of source
    `pieces`, EOS not counted: our limit (the longest source with EOS, plus
    `max_extra_length`, at most `max_output_length`, EOS included) less the
    EOS that `SearchOutputs` adds where the limit stops a hypothesis."""
    longest = max((len(p) for p in pieces), default=0) + 1
    limit = min(longest + settings.max_extra_length, settings.max_output_length)
    return max(limit - 1, 1)


def controls(settings):
    """The options every search passes: the output controls of `settings`."""
    return dict(
        min_decoding_length=settings.min_length,
        no_repeat_ngram_size=settings.no_repeat_ngram_size,
        repetition_penalty=settings.repetition_penalty,
    )


class SearchOutputs:
    """Turns one CTranslate2 search call into our hypotheses.

    Args:
        translator: the `ctranslate2.Translator` that scores (`score_batch`).
        pieces: the host tokenizer (`never_generated`, `eos_piece`, `text`).
    """

    def __init__(self, translator, pieces):
        self.translator, self.pieces = translator, pieces

    def best_first(self, search, sources, settings):
        """For each source of `sources` (pieces), its hypotheses from
        `search(sources, **options)` (a `translate_batch` call) as
        `Hypothesis`, best first by GNMT's length penalty (`settings`'
        `alpha`)."""
        finished = self._finished(sources, *self._searched(search, sources), settings)
        alpha = settings.alpha
        return [
            sorted(
                (
                    Hypothesis(
                        translation=self.pieces.text(tokens[:-1]),
                        score=log_prob / length_penalty(len(tokens), alpha),
                        log_prob=log_prob,
                        tokens=tokens,
                    )
                    for tokens, log_prob in options
                ),
                key=lambda h: -h.score,
            )
            for options in finished
        ]

    def _searched(self, search, sources):
        """`search(sources, **options)`'s results, never with PAD or BOS (as
        every TensorFlow search masks them), and the indices of the sources
        searched again for that.

        CTranslate2's `suppress_sequences` takes the suppressed pieces out
        before its softmax, so its scores would be log-probabilities among
        the other pieces, where ours are the model's. So a search runs
        without it, and only the sources whose hypotheses hold PAD or BOS
        (a model that has not learnt to avoid them) are searched again with
        it, and their hypotheses re-scored by the model (`_finished`)."""
        results = search(sources)
        never = set(self.pieces.never_generated)
        again = [
            i for i, r in enumerate(results) if any(never.intersection(h) for h in r.hypotheses)
        ]
        if again:
            suppressed = [[piece] for piece in sorted(never)]
            redone = search([sources[i] for i in again], suppress_sequences=suppressed)
            for i, result in zip(again, redone, strict=True):
                results[i] = result
        return results, frozenset(again)

    def _finished(self, sources, results, again, settings):
        """Per result, its hypotheses as `(tokens, log_prob)`, each ending
        with EOS: one the length limit stopped gets EOS and EOS's
        log-probability, as our searches force EOS at the limit, and those
        of a source searched `again` without PAD and BOS their
        log-probabilities under the model (one scoring call for both)."""
        eos = self.pieces.eos_piece
        outputs = [
            [(list(t), float(s)) for t, s in zip(r.hypotheses, r.scores, strict=True)]
            for r in results
        ]
        rescored = [
            (i, j)
            for i, hypotheses in enumerate(outputs)
            for j, (tokens, _) in enumerate(hypotheses)
            if not tokens or tokens[-1] != eos or i in again
        ]
        if rescored and (settings.repetition_penalty != 1.0 or settings.no_repeat_ngram_size):
            warnings.warn(
                f"{len(rescored)} hypotheses ran to the length limit or were searched again "
                "without PAD and BOS; CTranslate2 re-scores them without repetition_penalty "
                "and no_repeat_ngram_size, so their scores differ from Translator's.",
                RuntimeWarning,
                stacklevel=5,
            )
        if rescored:
            scored = self.translator.score_batch(
                [sources[i] for i, _ in rescored],
                [_without_eos(outputs[i][j][0], eos) for i, j in rescored],
                max_input_length=0,
            )
            for (i, j), result in zip(rescored, scored, strict=True):
                outputs[i][j] = (list(result.tokens), float(sum(result.log_probs)))
        return outputs


def _without_eos(tokens, eos):
    """`tokens` without a final `eos` (CTranslate2's scoring appends it)."""
    return tokens[:-1] if tokens and tokens[-1] == eos else tokens


def aligned(hypothesis, source, attention, eos_piece):
    """`hypothesis` (with its tokens and token scores) of the source
    `source` (pieces, EOS not written) as an `AlignedTranslation`: its
    `attention` is `attention` (CTranslate2's, one row per target token,
    one column per piece) with the source's EOS column added (what the row
    lacks of 1), and a token without a row (past the rows, or a source of
    no piece) all on EOS; each token aligned to its row's column of most
    weight (the first on a tie)."""
    eos = len(source)
    rows = [[*row, max(0.0, 1.0 - sum(row))] for row in attention]
    rows += [[0.0] * eos + [1.0]] * (len(hypothesis.tokens) - len(rows))
    rows = rows[: len(hypothesis.tokens)]
    return AlignedTranslation(
        translation=hypothesis.translation,
        target_tokens=list(hypothesis.tokens),
        source_tokens=[*source, eos_piece],
        alignments=[max(range(len(row)), key=row.__getitem__) for row in rows],
        token_scores=list(hypothesis.token_scores),
        attention=rows,
    )

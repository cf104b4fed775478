"""The cross-attention of CTranslate2's best hypotheses, for alignments
(`CTranslate2Translator.translate_with_alignments`): the search's own,
with the first row of each taken from one greedy step.

CTranslate2's beam search (`return_attention`) gives the first decoding
step another row than the model's: on the README's Multi30k model, every
row after the first equals that of a forced decoding of the same
hypothesis (`target_prefix`) within 0.005, and the first differs in 399 of
400 test sentences; on the letter reverser the first rows were the 11 of
96 pieces whose argmax disagreed with `Translator`'s. (CTranslate2 4.8.5
gives the hypotheses of the sentence at place `q` of its length-sorted
batch the first row of the sentence at place `q // beam_size`.) The first
step's decoder input is BOS for every hypothesis, so one greedy step of
the source gives its row. That costs about half a forced decoding of the whole hypothesis,
which is what a hypothesis the search did not give as it is (stopped by
the length limit, or searched again without PAD and BOS) still needs.
"""


class SearchAttention:
    """Records the attention of a batch's searches (`search`, called as
    the search it wraps), then gives the rows of the best hypotheses
    (`of`).

    Args:
        translator: the `ctranslate2.Translator`.
        beam_search: `beam_search(sources, **options)`, a `translate_batch`
            call of the runner's search.
    """

    def __init__(self, translator, beam_search):
        self.translator, self.beam_search = translator, beam_search
        self.searched = {}  # (source pieces, hypothesis pieces) -> rows

    def search(self, sources, **options):
        """`beam_search(sources, **options)` with `return_attention`,
        each hypothesis' rows recorded."""
        results = self.beam_search(sources, return_attention=True, **options)
        for source, result in zip(sources, results, strict=True):
            for tokens, rows in zip(result.hypotheses, result.attention, strict=True):
                self.searched[tuple(source), tuple(tokens)] = rows
        return results

    def of(self, pieces, best):
        """`{row: attention rows}` of the hypotheses `best[row]` (each with
        its `tokens`, EOS's last) of the sources `pieces[row]`, for every
        source of at least one piece."""
        rows = [i for i, source in enumerate(pieces) if source]  # none decodes no source
        searched = {i: self.searched.get((tuple(pieces[i]), tuple(best[i].tokens))) for i in rows}
        found = [i for i in rows if searched[i]]
        first = self._first_rows(pieces, found)
        attention = {i: [first[i], *searched[i][1:]] for i in found}
        attention.update(self._forced(pieces, best, [i for i in rows if not searched[i]]))
        return attention

    def _first_rows(self, pieces, rows):
        """`{row: the first step's attention}` of the sources
        `pieces[row]`, from one greedy step."""
        if not rows:
            return {}
        stepped = self.translator.translate_batch(
            [pieces[i] for i in rows],
            beam_size=1,
            return_attention=True,
            return_end_token=True,
            max_input_length=0,
            max_decoding_length=1,
        )
        return {i: result.attention[0][0] for i, result in zip(rows, stepped, strict=True)}

    def _forced(self, pieces, best, rows):
        """`{row: attention rows}` of the hypotheses `best[row]` of the
        sources `pieces[row]`, decoded forced (their tokens as the target
        prefix)."""
        if not rows:
            return {}
        targets = [best[i].tokens[:-1] for i in rows]
        forced = self.translator.translate_batch(
            [pieces[i] for i in rows],
            target_prefix=targets,
            beam_size=1,
            return_attention=True,
            return_end_token=True,
            max_input_length=0,
            max_decoding_length=max(len(t) for t in targets) + 1,
        )
        return {i: result.attention[0] for i, result in zip(rows, forced, strict=True)}

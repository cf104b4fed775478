"""BLEU as `wmt_ende.py` reports it: sacreBLEU and chrF on detokenized
text, and the paper's tokenized BLEU with hyphenated compounds split.

    from bleu import bleu_scores
    bleu_scores(["Ein Hund läuft."], ["Ein Hund rennt."])
"""

import re

import sacrebleu
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

_TOKENIZE_13A = Tokenizer13a()


def split_compounds(text):
    """13a-tokenized `text` with hyphenated compounds split as
    `a ##AT##-##AT## b`, as tensor2tensor's `get_ende_bleu.sh` does."""
    return re.sub(r"(\S)-(\S)", r"\1 ##AT##-##AT## \2", _TOKENIZE_13A(text))


def compound_split_bleu(hypotheses, references):
    """The paper's BLEU measure: a `sacrebleu` score of tokenized,
    compound-split text (not comparable with sacreBLEU's own numbers)."""
    return sacrebleu.corpus_bleu(
        [split_compounds(h) for h in hypotheses],
        [[split_compounds(r) for r in references]],
        tokenize="none",
        force=True,  # tokenized on purpose: no "forgot to detokenize" warning
    )


def bleu_scores(hypotheses, references):
    """The measures of one set of hypotheses, as a JSON-ready dict:
    `sacrebleu` (with its `signature`), `chrf` (with `chrf_signature`),
    `tokenized_compound_split_bleu` and the number of `sentences`."""
    hypotheses, references = list(hypotheses), list(references)
    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    return {
        "sacrebleu": bleu.corpus_score(hypotheses, [references]).score,
        "signature": str(bleu.get_signature()),
        "chrf": chrf.corpus_score(hypotheses, [references]).score,
        "chrf_signature": str(chrf.get_signature()),
        "tokenized_compound_split_bleu": compound_split_bleu(hypotheses, references).score,
        "sentences": len(hypotheses),
    }

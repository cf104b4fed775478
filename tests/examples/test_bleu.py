"""examples/bleu.py against sacreBLEU on text split by hand."""

import pytest
import sacrebleu

from tests.examples.helpers import load_example

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

bleu = load_example("bleu")
HYPOTHESES = ["Ein Mann fährt ein Rad.", "Ein Hund spielt im Schnee-Feld."]
REFERENCES = ["Ein Mann fährt Fahrrad.", "Ein Hund spielt im Schnee-Feld ."]


def test_compounds_are_split_after_13a_tokenization():
    assert bleu.split_compounds("Schnee-Feld, Nord-Süd-Achse.") == (
        "Schnee ##AT##-##AT## Feld , Nord ##AT##-##AT## Süd ##AT##-##AT## Achse ."
    )


def test_compound_split_bleu_equals_sacrebleu_on_split_text():
    by_hand = [
        ["Ein Mann fährt ein Rad .", "Ein Hund spielt im Schnee ##AT##-##AT## Feld ."],
        [["Ein Mann fährt Fahrrad .", "Ein Hund spielt im Schnee ##AT##-##AT## Feld ."]],
    ]
    expected = sacrebleu.corpus_bleu(*by_hand, tokenize="none").score
    assert bleu.compound_split_bleu(HYPOTHESES, REFERENCES).score == expected


def test_scores_report_both_measures():
    scores = bleu.bleu_scores(HYPOTHESES, REFERENCES)
    assert scores["sacrebleu"] == sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score
    assert scores["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert scores["sentences"] == 2
    assert bleu.bleu_scores(REFERENCES, REFERENCES)["sacrebleu"] == pytest.approx(100.0)


def test_the_tokenized_measure_does_not_warn_about_tokenization(caplog):
    """sacreBLEU warns that text whose lines end in a tokenized period
    "forgot to detokenize"; the paper's measure tokenizes on purpose."""
    lines = [f"Ein Hund läuft {n}." for n in range(120)]
    with caplog.at_level("WARNING", logger="sacrebleu"):
        score = bleu.compound_split_bleu(lines, lines).score
    assert score == pytest.approx(100.0)
    assert not [r for r in caplog.records if "detokenize" in r.getMessage()]
    with caplog.at_level("WARNING", logger="sacrebleu"):  # the check it skips
        sacrebleu.corpus_bleu([bleu.split_compounds(x) for x in lines], [lines], tokenize="none")
    assert [r for r in caplog.records if "detokenize" in r.getMessage()]

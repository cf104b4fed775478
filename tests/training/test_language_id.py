"""training.LanguageIdentifier: trained on sentences drawn from four small
lexicons, it names the language of new sentences drawn from them, and
counts off-target outputs exactly on a known mixture."""

import random

import pytest

from keras_transformer import training

LEXICONS = {
    "en": "a man dog woman is the with are two people in street his child playing running "
    "young white black water shirt standing wearing front of and",
    "de": "ein mann hund frau ist der mit sind zwei leute auf straße seinem kind spielt läuft "
    "junge weißen schwarzen wasser hemd steht trägt vor einem und",
    "fr": "un homme chien femme est le avec sont deux personnes dans rue son enfant joue court "
    "jeune blanc noir eau chemise debout portant devant d'un et",
    "cs": "muž pes žena je s jsou dva lidé na ulici jeho dítě hraje běží mladý bílé černé "
    "vodě košili stojí má před a",
}


def sentences(code, count, seed):
    words, draw = LEXICONS[code].split(), random.Random(seed)
    return [" ".join(draw.choices(words, k=draw.randint(3, 9))) for _ in range(count)]


@pytest.fixture(scope="module")
def identifier():
    return training.LanguageIdentifier.train({c: sentences(c, 400, 0) for c in LEXICONS})


def test_new_sentences_are_identified(identifier):
    for code in LEXICONS:
        found = identifier.identify(sentences(code, 200, 1))
        assert sum(f == code for f in found) >= 196, (code, found)


def test_the_off_target_rate_of_a_known_mixture(identifier):
    german = sentences("de", 90, 2)
    copied = [s.capitalize() + "." for s in sentences("en", 10, 3)]  # the source copied
    assert identifier.off_target_rate(german + copied, "de") == pytest.approx(0.1)
    assert identifier.off_target_rate(german + ["", "  "], "de") == 0.0
    assert identifier.identify(["", "ein mann"]) == [None, "de"]


def test_bad_arguments_are_refused(identifier):
    with pytest.raises(ValueError, match="target_lang"):
        identifier.off_target_rate(["ein mann"], "es")
    with pytest.raises(ValueError, match="at least two languages"):
        training.LanguageIdentifier.train({"de": ["ein mann"]})
    with pytest.raises(ValueError, match="none for 'fr'"):
        training.LanguageIdentifier.train({"de": ["ein mann"], "fr": []})

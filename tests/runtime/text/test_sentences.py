"""Sentence splitting on the hosts, against a table of cases (which the
graph's splitter is held to as well, tests/tokenization/test_sentences.py)."""

import pytest

from keras_transformer_runtime.text.sentences import joined
from keras_transformer_runtime.text.sentences import segments

# (text, its sentences with the separators between them); "|" joins the
# sentences of the expected split, where the separator is one space.
CASES = [
    # Plain sentence ends.
    ("A dog runs. A cat sleeps.", "A dog runs.|A cat sleeps."),
    ("Is it? Yes! Good.", "Is it?|Yes!|Good."),
    ("One sentence only.", "One sentence only."),
    ("No final punctuation", "No final punctuation"),
    ("", ""),
    ("Two spaces.  Kept as they are.", ["Two spaces.", "  ", "Kept as they are."]),
    ("Tab.\tNext.", ["Tab.", "\t", "Next."]),
    ("Ends with space. ", "Ends with space. "),
    ("Numbers next. 42 dogs ran.", "Numbers next.|42 dogs ran."),
    ("Wait... Then go.", "Wait...|Then go."),
    ("Wait\u2026 Then go.", "Wait\u2026|Then go."),
    ("Really?! Yes.", "Really?!|Yes."),
    # Lower case after the period: no sentence start.
    ("It costs 5 dollars. and more.", "It costs 5 dollars. and more."),
    ("see the list. then go", "see the list. then go"),
    # Abbreviations and titles.
    ("Dr. Smith is here. He waits.", "Dr. Smith is here.|He waits."),
    ("Mr. and Mrs. Brown came. They sat.", "Mr. and Mrs. Brown came.|They sat."),
    ("Prof. Adams spoke.", "Prof. Adams spoke."),
    ("St. Louis is big. It is old.", "St. Louis is big.|It is old."),
    ("Compare A vs. B here.", "Compare A vs. B here."),
    ("See Fig. 3 for details.", "See Fig. 3 for details."),
    ("It was Jan. 5 then.", "It was Jan. 5 then."),
    ("Sgt. Pepper plays. Gen. Lee rides.", "Sgt. Pepper plays.|Gen. Lee rides."),
    # Initials.
    ("J. K. Rowling wrote it. It sold.", "J. K. Rowling wrote it.|It sold."),
    ("J.K. Rowling wrote it.", "J.K. Rowling wrote it."),
    ("Read p. 5 first.", "Read p. 5 first."),
    ("George W. Bush spoke.", "George W. Bush spoke."),
    # Letters between dots.
    ("Use e.g. This one.", "Use e.g. This one."),
    ("That is, i.e. The rule.", "That is, i.e. The rule."),
    ("The U.S. Army came.", "The U.S. Army came."),
    ("Er kam z.B. Montags.", "Er kam z.B. Montags."),
    # Decimals, ordinals, years.
    ("It is 3.5 meters long. It fits.", "It is 3.5 meters long.|It fits."),
    ("Am 3. Oktober kam er.", "Am 3. Oktober kam er."),
    ("Der 24. Dezember ist da.", "Der 24. Dezember ist da."),
    ("It was 2019. The year ended.", "It was 2019.|The year ended."),
    ("Pi is 3.14159. It never ends.", "Pi is 3.14159.|It never ends."),
    ("Version 2.0.1 is out. Get it.", "Version 2.0.1 is out.|Get it."),
    # Quotes and brackets.
    ('He said "Stop." Then he left.', 'He said "Stop."|Then he left.'),
    ('It ended. "Why?" she asked.', 'It ended.|"Why?" she asked.'),
    ("He left (at last.) Then rain.", "He left (at last.)|Then rain."),
    ("She wrote \u201cYes.\u201d We agreed.", "She wrote \u201cYes.\u201d|We agreed."),
    ("Done. \u2018Fine,\u2019 he said.", "Done.|\u2018Fine,\u2019 he said."),
    ("It ended. (A new one began.)", "It ended.|(A new one began.)"),
    ("'Go.' 'Now.'", "'Go.'|'Now.'"),
    # URLs and e-mail addresses.
    ("Visit www.example.com today.", "Visit www.example.com today."),
    ("Visit example.com. Then rest.", "Visit example.com.|Then rest."),
    ("Mail a.b@c.de now.", "Mail a.b@c.de now."),
    ("Mail me at x@y.org. Thanks.", "Mail me at x@y.org.|Thanks."),
    ("See https://a.org/x.html for it.", "See https://a.org/x.html for it."),
    # German.
    ("Der Hund läuft. Die Katze schläft.", "Der Hund läuft.|Die Katze schläft."),
    ("Er sagte: \u201eHallo.\u201c Dann ging er.", "Er sagte: \u201eHallo.\u201c|Dann ging er."),
    ("Sie rief \u201aJa!\u2018 Er nickte.", "Sie rief \u201aJa!\u2018|Er nickte."),
    ("Er las \u00bbFaust.\u00ab Dann schlief er.", "Er las \u00bbFaust.\u00ab|Dann schlief er."),
    ("Es ist kalt. \u00dcberall liegt Schnee.", "Es ist kalt.|\u00dcberall liegt Schnee."),
    ("Das kostet ca. Zehn Euro.", "Das kostet ca. Zehn Euro."),
    ("Siehe Nr. 5 und vgl. Abschnitt 2.", "Siehe Nr. 5 und vgl. Abschnitt 2."),
    # French.
    ("Il pleut. Elle dort.", "Il pleut.|Elle dort."),
    ("Quoi ? Oui !", ["Quoi ?", " ", "Oui !"]),
    ("M. Dupont arrive. Mme Roy part.", "M. Dupont arrive.|Mme Roy part."),
    ("\u00ab Bonjour. \u00bb Puis il part.", "\u00ab Bonjour. \u00bb|Puis il part."),
    ("Il dit \u00ab Non. \u00bb Fin.", "Il dit \u00ab Non. \u00bb|Fin."),
    ("\u00c0 bient\u00f4t. \u00c9crivez-moi.", "\u00c0 bient\u00f4t.|\u00c9crivez-moi."),
    # Spanish openers.
    ("Hola. \u00bfQu\u00e9 tal? \u00a1Bien!", "Hola.|\u00bfQu\u00e9 tal?|\u00a1Bien!"),
    # Line breaks: always a boundary, kept as they are.
    ("First line\nsecond line", ["First line", "\n", "second line"]),
    ("A.\n\nB.", ["A.", "\n\n", "B."]),
    ("A.  \n  B.", ["A.", "  \n  ", "B."]),
    ("Line\r\nnext", ["Line", "\r\n", "next"]),
    ("\nLeading", ["", "\n", "Leading"]),
    ("Trailing\n", ["Trailing", "\n", ""]),
    ("A.\n\n\nBe. Go.", ["A.", "\n\n\n", "Be.", " ", "Go."]),
    # Scripts without spaces between sentences: left whole.
    ("今日は。明日も。", "今日は。明日も。"),
    ("我很好。你呢？", "我很好。你呢？"),
    # Other scripts with spaces.
    ("Он спит. Она читает.", "Он спит.|Она читает."),
    ("Ναι. Όχι.", "Ναι.|Όχι."),
    # Emoji and symbols.
    ("Great! \U0001f600 Then more.", "Great! \U0001f600 Then more."),
    ("Great. 5\u20ac is cheap.", "Great.|5\u20ac is cheap."),
    # The noncharacters the splitter uses: such a text is left whole.
    ("Odd\ufdd0 text. Here.", "Odd\ufdd0 text. Here."),
    # Unicode spaces between sentences split as a space does (no-break,
    # narrow no-break, thin, ideographic), and a Unicode line separator.
    ("One.\u00a0Two.", ["One.", "\u00a0", "Two."]),
    ("One.\u202fTwo.", ["One.", "\u202f", "Two."]),
    ("One.\u2009Two.", ["One.", "\u2009", "Two."]),
    ("One.\u3000Two.", ["One.", "\u3000", "Two."]),
    ("Wait.\u00a0\u00bbGo.\u00ab", ["Wait.", "\u00a0", "\u00bbGo.\u00ab"]),
    ("Line\n\u00a0next.", ["Line", "\n\u00a0", "next."]),
    # CJK full stops, marks and quotes: no space after them, no split.
    (
        "\u300c\u6211\u5f88\u597d\u3002\u300d\u4f60\u5462\uff1f",
        "\u300c\u6211\u5f88\u597d\u3002\u300d\u4f60\u5462\uff1f",
    ),
    ("\u5f88\u597d\uff01 Yes.", "\u5f88\u597d\uff01 Yes."),
]


def expected_segments(expected):
    if isinstance(expected, list):
        return expected
    sentences = expected.split("|")
    parts = [sentences[0]]
    for sentence in sentences[1:]:
        parts += [" ", sentence]
    return parts


@pytest.mark.parametrize("text, expected", CASES, ids=range(len(CASES)))
def test_splits_as_the_table_says(text, expected):
    parts = segments(text)
    assert parts == expected_segments(expected)
    assert "".join(parts) == text
    assert len(parts) % 2 == 1


def test_the_table_holds_sixty_cases():
    assert len(CASES) >= 60


def test_translations_join_with_the_separators():
    parts = segments("It rains.\n\nStay. Go.")
    assert joined(["Es regnet.", "Bleib.", "Geh."], parts) == "Es regnet.\n\nBleib. Geh."
    assert joined(["Eins."], segments("One.")) == "Eins."
    with pytest.raises(ValueError, match=r"one translation per sentence \(3\). Received: 2"):
        joined(["a", "b"], parts)

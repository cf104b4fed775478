"""What counts as a word (`text.words.WORD`), against words written out
by hand."""

from keras_transformer_runtime.text import words
from keras_transformer_runtime.text.words import WORD


def test_a_word_keeps_its_combining_marks():
    # Python's `\w` leaves out combining marks: Devanagari's vowel signs
    # and virama, Tamil's, a diaeresis written apart. Each is inside its word.
    found = [m.group() for m in WORD.finditer("हिन्दी भाषा, தமிழ்!")]
    assert found == ["हिन्दी", "भाषा", ",", "தமிழ்", "!"]
    assert [m.group() for m in WORD.finditer("Ma\u0308dchen's")] == ["Ma\u0308dchen's"]
    assert WORD.findall("a well-known dog's toy.") == ["a", "well-known", "dog's", "toy", "."]


def test_the_pattern_is_built_on_first_use_and_once():
    built = []
    pattern = words._OnFirstUse(lambda: built.append(1) or r"\d+")
    assert built == []
    assert pattern.findall("a1b22") == ["1", "22"]
    assert pattern.search("x3").group() == "3"
    assert built == [1]

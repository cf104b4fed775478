"""benchmarks/word_alignment_accuracy.py: which words it checks, and how
it counts a runner's alignments against them."""

import os
import sys

import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)

import word_alignment_accuracy as accuracy  # noqa: E402

SOURCES = [
    accuracy.words("A man and a dog play ."),
    accuracy.words("Two men sit ."),
]
REFERENCES = [
    accuracy.words("Ein Mann und ein Hund spielen ."),
    accuracy.words("Zwei Männer sitzen ."),
]
LINKS = [
    # a->ein twice (each "a" and "ein" occurs twice: neither counts), man,
    # dog, play; "and" is linked to two words (does not count), "." is no
    # word of letters.
    {(0, 0), (1, 1), (2, 2), (2, 3), (3, 3), (4, 4), (5, 5), (6, 6)},
    {(0, 0), (1, 1), (2, 2), (3, 3)},
]


def test_only_words_with_one_link_to_a_unique_word_are_checked():
    cases = accuracy.checkable(SOURCES, REFERENCES, LINKS)
    assert [(c.row, c.source_word, c.target) for c in cases] == [
        (0, 1, "mann"),
        (0, 4, "hund"),
        (0, 5, "spielen"),
        (1, 0, "zwei"),
        (1, 1, "männer"),
        (1, 2, "sitzen"),
    ]
    assert [c.place for c in cases] == ["second", "later", "later", "first", "second", "later"]


def test_a_word_counts_where_the_translation_holds_it_once():
    cases = accuracy.checkable(SOURCES, REFERENCES, LINKS)
    translations = ["Ein Mann und ein Hund spielen Hund .", "Zwei Männer sitzen ."]
    # Translation words: Ein Mann und ein Hund spielen Hund . / Zwei Männer sitzen .
    alignments = [[0, 1, 2, 3, 4, 5, 4, 6], [0, 2, 1, 3]]
    found = accuracy.accuracy(cases, translations, alignments)
    # "hund" occurs twice in the first translation: not counted. "mann"
    # and "spielen" right; "zwei" right, "männer" and "sitzen" swapped.
    assert found == {"first": (1, 1), "second": (1, 2), "later": (1, 2), "all": (3, 5)}


def test_eflomal_links_are_the_intersection_of_both_directions():
    pytest.importorskip("eflomal")
    nouns = {"dog": "hund", "cat": "katze", "bird": "vogel"}
    verbs = {"runs": "rennt", "sleeps": "schläft", "eats": "frisst"}
    articles = {"a": "ein", "the": "der"}
    pairs = [
        ([a, n, v], [articles[a], nouns[n], verbs[v]])
        for a in articles
        for n in nouns
        for v in verbs
    ] * 20
    links = accuracy.eflomal_links([s for s, _ in pairs], [t for _, t in pairs])
    assert len(links) == len(pairs)
    # Every noun and verb is linked to its translation, both ways.
    assert all({(1, 1), (2, 2)} <= row for row in links)

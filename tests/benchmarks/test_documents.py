"""benchmarks/documents.py: the paragraphs and long texts it builds."""

import os
import sys

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)

import documents  # noqa: E402


def test_paragraphs_cover_every_sentence_once_in_order():
    sizes = documents.paragraph_sizes(1000)
    assert sum(sizes) == 1000 and all(2 <= s <= 8 for s in sizes[:-1]) and sizes[-1] >= 1
    assert sizes == documents.paragraph_sizes(1000)  # seeded
    sentences = [f"S{i}." for i in range(1000)]
    groups = documents.grouped(sentences, sizes)
    assert [s for group in groups for s in group] == sentences


def test_a_long_text_has_at_least_the_words_asked_and_counts_its_sentences():
    sentences = ["A dog runs.", "Two cats sleep here.", "Rain."]
    text = documents.long_text(sentences, 12)
    assert len(text.split()) >= 12 and len(text.split()) - 4 < 12
    assert text.startswith("A dog runs. Two cats sleep here. Rain. A dog runs.")
    assert documents.sentence_count(text) == text.count(".")
    assert documents.sentence_count("\nOne.\n\nTwo. ") == 2

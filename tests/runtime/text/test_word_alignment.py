"""Word alignments from token alignments, against alignments worked out
by hand from the pieces' places in the texts."""

import pytest

from keras_transformer_runtime.runners.results import AlignedTranslation
from keras_transformer_runtime.text.word_alignment import word_alignment
from keras_transformer_runtime.text.words import WORD


def aligned(translation, target_tokens, source_tokens, alignments):
    return AlignedTranslation(translation, target_tokens, source_tokens, alignments)


def test_a_word_of_several_pieces_takes_the_source_word_most_of_them_attend_to():
    found = aligned(
        "Ein kleines Mädchen klettert.",
        ["▁Ein", "▁klein", "es", "▁Mäd", "chen", "▁klettert", ".", "</s>"],
        ["▁A", "▁little", "▁girl", "▁climb", "s", ".", "</s>"],
        [0, 1, 2, 2, 2, 4, 5, 6],
    )
    # "kleines": pieces on "little" and "girl", a tie: the first; "Mädchen": "girl" twice.
    assert word_alignment(found, "A little girl climbs.") == [0, 1, 2, 3, 4]


def test_pieces_aligned_to_eos_or_out_of_range_leave_their_word_unaligned():
    found = aligned("Hund läuft", ["▁Hund", "▁läuft", "</s>"], ["▁dog", "▁runs", "</s>"], [2, 9, 2])
    assert word_alignment(found, "dog runs") == [None, None]


def test_byte_pieces_count_as_the_characters_they_decode_to():
    # "é" is two bytes, one character: the pieces after it stay in place.
    found = aligned(
        "Café noir",
        ["▁Caf", "<0xC3>", "<0xA9>", "▁noir", "</s>"],
        ["▁black", "▁coffee", "</s>"],
        [1, 1, 1, 0, 2],
    )
    assert word_alignment(found, "black coffee") == [1, 0]


def test_a_language_tag_and_sentence_ends_hold_no_characters():
    # Two sentences joined (`documents`), each with EOS; the source tagged.
    found = aligned(
        "Ja. Nein.",
        ["▁Ja", ".", "</s>", "▁Nein", ".", "</s>"],
        [">>de<<", "▁Yes", ".", "</s>", ">>de<<", "▁No", ".", "</s>"],
        [1, 2, 3, 5, 6, 7],
    )
    assert word_alignment(found, "Yes. No.") == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "source, pieces",
    [
        # NFKC: one character became two in the pieces ("ﬁ" -> "fi").
        ("a ﬁne day today", ["▁a", "▁fine", "▁day", "▁today", "</s>"]),
        # NFKC: three dots from one character ("…" -> "..."), at the end.
        ("wait for it…", ["▁wait", "▁for", "▁it", "...", "</s>"]),
    ],
)
def test_normalized_sources_are_matched_by_scaled_positions(source, pieces):
    # An identity translation: each target word aligned to the same piece.
    words = [w.lstrip("▁") for w in pieces[:-1]]
    translation = " ".join(words).replace(" ...", "...")
    found = aligned(translation, pieces, pieces, list(range(len(pieces))))
    alignment = word_alignment(found, source)
    source_words = [m.group() for m in WORD.finditer(source)]
    target_words = [m.group() for m in WORD.finditer(translation)]
    assert len(alignment) == len(target_words)
    # Every target word lands on a source word at its place: the first on
    # the first, the last on the last, and in order.
    assert alignment[0] == 0
    assert alignment[-1] == len(source_words) - 1
    assert alignment == sorted(alignment)


def test_with_the_whole_attention_words_are_matched_on_its_sums_by_word():
    # Every target piece attends most to "▁A" (the argmax alone aligns all
    # to it), but "▁klein"+"es" attend to "▁little" more than the others
    # do, and "▁Mäd"+"chen" to "▁gi"+"rl": summed by word and matched,
    # each word gets its own. "." attends most to EOS: unaligned.
    rows = [
        [0.70, 0.10, 0.05, 0.05, 0.05, 0.05],  # ▁Ein
        [0.50, 0.30, 0.05, 0.05, 0.05, 0.05],  # ▁klein
        [0.50, 0.30, 0.05, 0.05, 0.05, 0.05],  # es
        [0.50, 0.05, 0.20, 0.15, 0.05, 0.05],  # ▁Mäd
        [0.50, 0.05, 0.15, 0.20, 0.05, 0.05],  # chen
        [0.10, 0.05, 0.05, 0.05, 0.15, 0.60],  # .
        [0.10, 0.05, 0.05, 0.05, 0.15, 0.60],  # </s>
    ]
    found = AlignedTranslation(
        "Ein kleines Mädchen.",
        ["▁Ein", "▁klein", "es", "▁Mäd", "chen", ".", "</s>"],
        ["▁A", "▁little", "▁gi", "rl", ".", "</s>"],
        alignments=[max(range(6), key=row.__getitem__) for row in rows],
        attention=rows,
    )
    assert found.alignments[:5] == [0, 0, 0, 0, 0]
    assert word_alignment(found, "A little girl.") == [0, 1, 2, None]
    # The same pieces with the argmax only: every word on "A".
    argmax_only = AlignedTranslation(
        found.translation, found.target_tokens, found.source_tokens, found.alignments
    )
    assert word_alignment(argmax_only, "A little girl.") == [0, 0, 0, None]


@pytest.mark.parametrize("source", ["Ein Mädchen lacht.", "Ein Ma\u0308dchen lacht."])
def test_a_source_written_composed_or_decomposed_aligns_alike(source):
    # NFKC writes "a" + COMBINING DIAERESIS as "ä": the pieces hold one
    # character where the decomposed source holds two.
    found = aligned(
        "A girl laughs.",
        ["▁A", "▁girl", "▁laugh", "s", ".", "</s>"],
        ["▁Ein", "▁Mädchen", "▁lacht", ".", "</s>"],
        [0, 1, 2, 2, 3, 4],
    )
    assert word_alignment(found, source) == [0, 1, 2, 3]

"""Word alignments checked against eflomal's, word by word: how often a
runner aligns a translation's word to the source word a statistical
aligner links it to, by the source word's place in its sentence.

    pip install eflomal
    python benchmarks/word_alignment_accuracy.py --ctranslate2_dir exports/multi30k_ct2 \\
        --test_src data/multi30k/val.en.gz --test_ref data/multi30k/val.de.gz \\
        --train_src data/multi30k/train.en.gz --train_ref data/multi30k/train.de.gz

`markup_placement.py` tags 50 hand-checked nouns, most of them the second
word of their sentence ("A man"); this one checks every word that can be
checked, so that a change to the alignments (the matching, guided
alignment training) is judged on all of them.

The reference links: eflomal (Östling and Tiedemann, 2016; what Mozilla's
translations pipeline aligns with) over the training corpus with the test
set after it (its priors need more than a thousand pairs), forward and
reverse, intersected. A case: a source word with exactly one link, to a
reference word with exactly one link, both occurring once in their
sentences (lowercased `words.WORD`s; the reference word alphabetic). It
counts where the translation holds that word once, and is right when the
runner's word alignment of it (`word_alignment`, as markup is placed) is
the source word. Rows: each runner matched on the attention, with the
attention argmax only, and by position (`formats.by_position`).
"""

import argparse
import collections
import dataclasses

from keras_transformer_runtime.text import formats
from keras_transformer_runtime.text import word_links
from keras_transformer_runtime.text.files import read_lines
from keras_transformer_runtime.text.word_alignment import word_alignment
from keras_transformer_runtime.text.words import WORD

PLACES = ("first", "second", "later", "all")


@dataclasses.dataclass(frozen=True)
class Case:
    """One checkable word: sentence `row`, its source word at `source_word`
    (an index into its words), and the reference's word it is linked to."""

    row: int
    source_word: int
    target: str

    @property
    def place(self):
        return PLACES[min(self.source_word, 2)]


def words(text):
    """The lowercased `words.WORD`s of `text`."""
    return [m.group().lower() for m in WORD.finditer(text)]


def eflomal_links(sources, targets):
    """Intersected forward and reverse eflomal links of each pair of
    `sources` and `targets` (lists of word lists): a set of `(source
    index, target index)` per pair (`word_links.align_words`)."""
    lines = word_links.align_words([" ".join(s) for s in sources], [" ".join(t) for t in targets])
    return [word_links.link_pairs(line) for line in lines]


def checkable(sources, references, links):
    """The `Case`s of `sources` and `references` (lists of word lists)
    under their `links` (see the module's docstring)."""
    cases = []
    for row, (source, reference, pairs) in enumerate(zip(sources, references, links, strict=True)):
        from_source = collections.Counter(s for s, _ in pairs)
        to_target = collections.Counter(t for _, t in pairs)
        for s, t in sorted(pairs):
            word = reference[t]
            if (
                from_source[s] == 1
                and to_target[t] == 1
                and word.isalpha()
                and reference.count(word) == 1
                and source.count(source[s]) == 1
            ):
                cases.append(Case(row, s, word))
    return cases


def accuracy(cases, translations, alignments):
    """`{place: (right, counted)}` of `cases` given each sentence's
    translation and its word alignment (one source word index, or None,
    per `WORD` of the translation)."""
    right, counted = collections.Counter(), collections.Counter()
    for case in cases:
        translated = words(translations[case.row])
        if translated.count(case.target) != 1:
            continue
        found = alignments[case.row][translated.index(case.target)] == case.source_word
        for place in (case.place, "all"):
            counted[place] += 1
            right[place] += found
    return {place: (right[place], counted[place]) for place in PLACES}


def runner_alignments(runner, sources):
    """`{row label: (translations, word alignments)}` of one runner: matched
    on its attention, the argmax only, and by position."""
    aligned = runner.translate_with_alignments(sources)
    translations = [a.translation for a in aligned]
    argmax = [dataclasses.replace(a, attention=[]) for a in aligned]
    by_position = formats.by_position([words(s) for s in sources], translations)
    return {
        "matched on attention": (translations, _word_alignments(aligned, sources)),
        "attention argmax": (translations, _word_alignments(argmax, sources)),
        "by position": (translations, by_position),
    }


def _word_alignments(aligned, sources):
    return [word_alignment(a, s) for a, s in zip(aligned, sources, strict=True)]


def runners(args):
    """`(label, runner)` of each runner asked for."""
    found = []
    if args.ctranslate2_dir:
        from keras_transformer_runtime import CTranslate2Translator

        found.append(("CTranslate2", CTranslate2Translator(args.ctranslate2_dir)))
    if args.saved_model_dir:
        from keras_transformer_runtime import SavedModelTranslator

        found.append(("SavedModel", SavedModelTranslator(args.saved_model_dir)))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ctranslate2_dir")
    parser.add_argument("--saved_model_dir")
    parser.add_argument("--test_src", required=True)
    parser.add_argument("--test_ref", required=True)
    parser.add_argument("--train_src", required=True, help="more pairs for eflomal's priors")
    parser.add_argument("--train_ref", required=True)
    args = parser.parse_args()
    if not (args.ctranslate2_dir or args.saved_model_dir):
        parser.error("give --ctranslate2_dir or --saved_model_dir (or both)")
    sources, references = read_lines(args.test_src), read_lines(args.test_ref)
    train_sources, train_references = read_lines(args.train_src), read_lines(args.train_ref)
    source_words = [words(s) for s in train_sources + sources]
    reference_words = [words(r) for r in train_references + references]
    links = eflomal_links(source_words, reference_words)[len(train_sources) :]
    cases = checkable(
        source_words[len(train_sources) :], reference_words[len(train_sources) :], links
    )
    print(f"{len(cases)} checkable words in {len(sources)} sentences\n")
    print("| row | " + " | ".join(PLACES) + " |")
    print("| --- |" + " ---: |" * len(PLACES))
    for label, runner in runners(args):
        for kind, (translations, alignments) in runner_alignments(runner, sources).items():
            found = accuracy(cases, translations, alignments)
            cells = [f"{100 * r / max(n, 1):.1f}% ({n})" for r, n in found.values()]
            print(f"| {label}, {kind} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

"""Documents: split into sentences, translated, joined back; long
sentences in pieces (`keras_transformer_runtime.text.documents` and the
`Runner` methods built on it), with a runner that translates by rule."""

import warnings

import pytest

from keras_transformer_runtime.runners import runner
from keras_transformer_runtime.runners.results import AlignedTranslation
from keras_transformer_runtime.runners.results import Hypothesis
from keras_transformer_runtime.runners.results import RefusedRequestError
from keras_transformer_runtime.runners.settings import DecodingSettings
from keras_transformer_runtime.text.documents import Split
from keras_transformer_runtime.text.documents import word_pieces
from keras_transformer_runtime.text.sentences import segments
from tests.runtime.text.test_sentences import CASES


def tokens(text):
    """The rule runner's tokens: one per character that is not a space."""
    return [c for c in text if not c.isspace()]


class RuleRunner(runner.Runner):
    """Translates a sentence to upper case, its score minus its token
    count, with `n` hypotheses (the k-th with `k` exclamation marks);
    refuses sentences holding "REFUSE"."""

    methods = frozenset(runner.METHODS)

    def __init__(self, **settings):
        self.settings = DecodingSettings(**settings)
        self.calls = []

    def _source_lengths(self, texts):
        return [len(tokens(runner.as_text(text))) for text in texts]

    def _hypothesis(self, sentence, k=0, met=None):
        text = runner.as_text(sentence).upper() + "!" * k
        pieces = tokens(text) + ["</s>"]
        scores = [-1.0] * len(pieces)
        return Hypothesis(text, -float(len(pieces)), sum(scores), pieces, scores, met)

    def _translate_with_scores(self, sentences, n_best, token_scores, batch_size):
        self.calls.append(list(sentences))
        for i, sentence in enumerate(sentences):
            if "REFUSE" in runner.as_text(sentence):
                done = [[self._hypothesis(s)] for s in sentences[:i]]
                raise RefusedRequestError("too long", i, i + 1, done)
        return [[self._hypothesis(s, k) for k in range(n_best)] for s in sentences]

    def _translate_with_constraints(self, sentences, constraints, banned, batch_size):
        self.calls.append((list(sentences), constraints, banned))
        found = []
        for sentence, phrases in zip(sentences, constraints, strict=True):
            text = " ".join([sentence.upper(), *phrases])
            found.append(dataclass_replace(self._hypothesis(sentence), text, met=True))
        return found


def dataclass_replace(hypothesis, translation, met):
    return Hypothesis(
        translation, hypothesis.score, hypothesis.log_prob, hypothesis.tokens, [], met
    )


PARAGRAPHS = [
    "A dog runs. A cat sleeps.",
    "Dr. Smith arrived. He sat down.\nThen he left.\n\nThe end.",
    "\nStarts with a line break. Ends with one.\n",
    "One sentence.",
    "",
    "\n",
    "  Spaces first. Then more.  ",
]


def test_every_case_of_the_splitter_comes_back_whole_when_translated_as_itself():
    # Invariance: translating each sentence as itself gives the text back.
    texts = [text for text, _ in CASES] + PARAGRAPHS
    split = Split.of(texts)
    assert split.texts(split.sentences) == texts
    for row, text in enumerate(texts):
        parts = segments(text)
        sentences = [p for p in parts[::2] if p] if len(parts) > 1 else parts
        assert [split.sentences[i] for i in split.units(row)] == sentences


def test_each_sentence_is_translated_and_joined_with_the_texts_separators():
    translator = RuleRunner()
    texts = ["It rains. Stay home.\nBye.", "Hi", "\nOne.\n", "\n"]
    assert translator.translate(texts) == ["IT RAINS. STAY HOME.\nBYE.", "HI", "\nONE.\n", "\n"]
    # One call for every sentence of every text; empty sentences untranslated.
    assert translator.calls == [["It rains.", "Stay home.", "Bye.", "Hi", "One."]]
    # Not split: each text is one sentence.
    whole = RuleRunner(split_sentences=False)
    assert whole.translate(texts) == [t.upper() for t in texts]
    assert whole.calls == [texts]


def test_a_text_of_one_sentence_gives_exactly_its_hypotheses():
    translator = RuleRunner(beam_size=3)
    direct = translator._translate_with_scores(["Hi there", b"bytes."], 3, False, 64)
    assert translator.translate_with_scores(["Hi there", b"bytes."], n_best=3) == direct


def test_joined_hypotheses_sum_their_sentences_and_keep_every_token():
    translator = RuleRunner(beam_size=2)
    [options] = translator.translate_with_scores(["Ab. Cd e.\n"], n_best=2)
    first, second = (translator._hypothesis(s) for s in ("Ab.", "Cd e."))
    assert options[0] == Hypothesis(
        "AB. CD E.\n",
        first.score + second.score,
        first.log_prob + second.log_prob,
        first.tokens + second.tokens,
        first.token_scores + second.token_scores,
    )
    assert options[1].translation == "AB.! CD E.!\n"
    # Word scores end a word at each sentence's EOS.
    assert [w for w, _ in options[0].word_scores] == ["AB.", "CDE."]  # pieces have no ▁


def test_a_text_with_nothing_to_translate_keeps_its_separators_scored_zero():
    translator = RuleRunner(beam_size=2)
    [options] = translator.translate_with_scores(["\n\n"], n_best=2)
    assert options == [Hypothesis("\n\n", 0.0, 0.0, [], [])] * 2


def test_aligned_translations_are_offset_to_the_whole_source():
    first = AlignedTranslation("A", ["a", "</s>"], ["x", "y", "</s>"], [1, 2], [-1.0, -0.5])
    second = AlignedTranslation("B", ["b", "</s>"], ["z", "</s>"], [0, 1], [-2.0, -0.25])
    split = Split.of(["Ab cd. Ef.", "W"])
    single = AlignedTranslation("W", ["w", "</s>"], ["w", "</s>"], [0, 1], [0.0, 0.0])
    joined, alone = split.aligned([first, second, single])
    assert joined == AlignedTranslation(
        "A B",
        ["a", "</s>", "b", "</s>"],
        ["x", "y", "</s>", "z", "</s>"],
        [1, 2, 3, 4],
        [-1.0, -0.5, -2.0, -0.25],
    )
    assert alone is single


@pytest.mark.parametrize(
    "counts, limit, expected",
    [
        ([1, 1, 1], 5, [(0, 3)]),
        ([3, 3], 5, [(0, 1), (1, 2)]),
        ([2, 3, 1, 4], 5, [(0, 2), (2, 4)]),
        ([2, 3, 2, 4], 5, [(0, 2), (2, 3), (3, 4)]),
        ([7, 1], 5, [(0, 1), (1, 2)]),
        ([1, 7, 1], 5, [(0, 1), (1, 2), (2, 3)]),
    ],
)
def test_word_pieces_take_the_most_whole_words_that_fit(counts, limit, expected):
    assert word_pieces(counts, limit) == expected
    for start, end in expected:  # brute force: no piece could take one more word
        assert sum(counts[start:end]) <= limit or end - start == 1
        assert end == len(counts) or sum(counts[start : end + 1]) > limit


def test_a_sentence_over_the_limit_is_translated_in_pieces_with_a_warning():
    translator = RuleRunner(max_input_length=6)  # 5 tokens and EOS
    text = "ab cd ef gh. Short.\nabcdefgh ij"
    expected = r"2 input\(s\) had a sentence longer .*\[0, 2\].* 2 of them a word alone .*\[0, 2\]"
    with pytest.warns(RuntimeWarning, match=expected):
        out = translator.translate([text, "fits", "abcdefgh ij"])
    assert out == ["AB CD EF GH. SHORT.\nABCDEFGH IJ", "FITS", "ABCDEFGH IJ"]
    assert translator.calls == [["ab cd", "ef gh.", "Short.", "abcdefgh", "ij", "fits",
                                 "abcdefgh", "ij"]]  # fmt: skip
    for sentence in translator.calls[0]:
        assert len(tokens(sentence)) <= 5 or " " not in sentence
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RuleRunner(max_input_length=6).translate(["Abcd. Fghi."])  # each fits


def test_a_refused_sentence_names_its_text_and_keeps_the_texts_before():
    translator = RuleRunner()
    texts = ["One. Two.", "Three", "Four. REFUSE this.", "Five"]
    with pytest.raises(RefusedRequestError) as raised:
        translator.translate_with_scores(texts)
    assert (raised.value.start, raised.value.end) == (2, 3)
    assert [options[0].translation for options in raised.value.done] == ["ONE. TWO.", "THREE"]


@pytest.mark.parametrize("format", ["html", "markdown"])
def test_a_refused_paragraph_names_its_page_and_keeps_the_pages_before(format):
    translator = RuleRunner(split_sentences=False)
    if format == "html":
        pages = ["<p>One</p>", "<p>Two</p><p>Three</p>", "<p>Four</p><p>REFUSE</p>", "<p>Five</p>"]
        before = ["<p>ONE</p>", "<p>TWO</p><p>THREE</p>"]
    else:
        pages = ["One\n", "Two\n\nThree\n", "Four\n\nREFUSE\n", "Five\n"]
        before = ["ONE\n", "TWO\n\nTHREE\n"]
    with pytest.raises(RefusedRequestError, match="refuses item 3: too long") as raised:
        translator.translate(pages, format=format)
    assert (raised.value.start, raised.value.end, raised.value.done) == (2, 3, before)
    with pytest.raises(RefusedRequestError) as raised:
        translator.translate_documents(pages, format)
    assert [document.translation for document in raised.value.done] == before
    with pytest.raises(RefusedRequestError) as raised:  # plain text: the same, translations done
        translator.translate(["One", "REFUSE", "Two"])
    assert (raised.value.start, raised.value.done) == (1, ["ONE"])


def test_constraints_of_a_text_go_to_its_longest_sentence_unless_one_holds_them():
    translator = RuleRunner()
    texts = ["Short. A longer one here.", "Alone"]
    constraints = [["SHORT", "Baum"], ["Haus"]]
    found = translator.translate_with_constraints(texts, constraints, banned=[["x"], ["y"]])
    # "SHORT" is in the first pass's translation: not forced again.
    assert [h.translation for h in found] == ["SHORT. A LONGER ONE HERE. Baum", "ALONE Haus"]
    assert all(h.constraints_met for h in found)
    first, second = translator.calls
    assert first == (
        ["Short.", "A longer one here.", "Alone"], [[], [], ["Haus"]], [["x"], ["x"], ["y"]]
    )  # fmt: skip
    assert second == (["A longer one here."], [["Baum"]], [["x"]])


def test_a_glossary_gives_each_sentence_the_terms_of_its_source():
    from keras_transformer_runtime.text.glossary import Glossary

    translator = RuleRunner()
    glossary = Glossary([("dog", "Hund"), ("park", "Park")])
    texts = ["A dog runs. The park is big.", "No terms."]
    found = translator.translate_with_constraints(texts, [["Baum"], []], glossary=glossary)
    assert [h.translation for h in found] == [
        "A DOG RUNS. Hund THE PARK IS BIG. Park Baum", "NO TERMS."
    ]  # fmt: skip
    (first, *_), (second, *_) = translator.calls
    assert translator.calls[0][1] == [["Hund"], ["Park"], []]
    assert translator.calls[1][:2] == (["The park is big."], [["Park", "Baum"]])
    assert first == ["A dog runs.", "The park is big.", "No terms."]
    assert second == ["The park is big."]


def test_a_text_with_nothing_to_translate_meets_only_no_constraints():
    translator = RuleRunner()
    found = translator.translate_with_constraints(["\n", "\n"], [[], ["Hund"]])
    assert [(h.translation, h.constraints_met) for h in found] == [("\n", True), ("\n", False)]


class RefusingSecondPass(RuleRunner):
    """Refuses a sentence given more than one constraint."""

    def _translate_with_constraints(self, sentences, constraints, banned, batch_size):
        for i, phrases in enumerate(constraints):
            if len(phrases) > 1:
                done = super()._translate_with_constraints(
                    sentences[:i], constraints[:i], banned[:i], batch_size
                )
                raise RefusedRequestError("too many", i, i + 1, done)
        return super()._translate_with_constraints(sentences, constraints, banned, batch_size)


def test_a_sentence_refused_when_given_its_texts_constraints_names_that_text():
    translator = RefusingSecondPass()
    texts = ["Fine.", "One. The longest one.", "Also fine. And longer here.", "Last."]
    constraints = [[], ["x"], ["y", "z"], []]
    with pytest.raises(RefusedRequestError) as raised:
        translator.translate_with_constraints(texts, constraints)
    assert (raised.value.start, raised.value.end) == (2, 3)
    assert [h.translation for h in raised.value.done] == ["FINE.", "ONE. THE LONGEST ONE. x"]

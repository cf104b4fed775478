"""keras_transformer_runtime.text.languages and the runners' `target_lang`: the
languages a model knows are its vocabulary's tags, every sentence of a
request is tagged with its own, and an unknown language is refused."""

import pytest

from keras_transformer_runtime.text import languages
from keras_transformer_runtime.text.languages import TargetLanguages
from tests.runtime.serving.reversing import ReversingRunner

KNOWN = TargetLanguages(("cs", "de", "fr"))


class TaggedReverser(ReversingRunner):
    """The reversing rule runner of a model that knows `KNOWN`, splitting
    texts into sentences: what it translates is recorded in `calls`."""

    languages = KNOWN

    def __init__(self):
        super().__init__()
        self.settings = self.settings.replace(split_sentences=True, max_input_length=64)


def test_the_languages_are_the_tags_among_the_pieces():
    pieces = ["<pad>", "<unk>", ">>fr<<", "▁a", ">>de<<", ">>", "a>>x<<", ">>pt_BR<<", ">> x<<"]
    assert TargetLanguages.of_pieces(pieces).codes == ("de", "fr", "pt_BR")
    assert not TargetLanguages.of_pieces(["<pad>", "▁a"])
    assert languages.tags(["de", "fr"]) == [">>de<<", ">>fr<<"]


def test_a_request_names_one_language_for_all_or_one_per_text():
    assert KNOWN.requested(["a", "b"], "fr") == (["a", "b"], ["fr", "fr"])
    assert KNOWN.requested(["a", "b"], ["fr", "cs"]) == (["a", "b"], ["fr", "cs"])
    assert KNOWN.tagged("A dog.", "cs") == ">>cs<< A dog."
    assert KNOWN.tagged("A dog.", None) == "A dog."


def test_a_typed_leading_tag_asks_for_its_language_and_is_removed():
    texts, codes = KNOWN.requested([">>fr<< A dog. A cat.", "  >>de<<A cow."], None)
    assert (texts, codes) == (["A dog. A cat.", "A cow."], ["fr", "de"])


@pytest.mark.parametrize(
    "texts, target_lang, message",
    [
        (["a"], "es", "one of the languages this model knows: 'cs', 'de', 'fr'. Received: "
                      "target_lang='es'"),
        (["a", "b"], ["de"], "1 languages for 2 sentences"),
        (["a"], 3, "a language code"),
        (["a"], [None], "Received: target_lang=None"),
        (["a dog"], None, "pass `target_lang`, one of 'cs', 'de', 'fr'"),
        ([">>es<< a dog"], None, "Received: target_lang='es'"),
    ],
)  # fmt: skip
def test_a_language_the_model_does_not_know_is_refused(texts, target_lang, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        KNOWN.requested(texts, target_lang)


def test_a_model_of_one_language_takes_no_target_lang():
    one = TargetLanguages()
    assert one.requested([">>fr<< a"], None) == ([">>fr<< a"], [None])
    with pytest.raises(ValueError, match="translates into one language"):
        one.requested(["a"], "fr")


@pytest.mark.parametrize("value", ["", "de,,fr", "de,de", "d e", ["de", 1]])
def test_language_codes_are_checked(value):
    with pytest.raises(ValueError, match="target_lang"):
        languages.check_codes(value)


def test_every_sentence_of_a_text_is_tagged_with_its_texts_language():
    runner = TaggedReverser()
    found = runner.translate(["A dog. A cat.", "A cow."], target_lang=["fr", "cs"])
    assert sorted(runner.calls[0]) == sorted([">>fr<< A dog.", ">>fr<< A cat.", ">>cs<< A cow."])
    assert found == [">>fr<< A dog."[::-1] + " " + ">>fr<< A cat."[::-1], ">>cs<< A cow."[::-1]]


def test_every_runner_method_refuses_an_unknown_language_before_translating():
    runner = TaggedReverser()
    calls = [
        lambda: runner.translate(["a"], target_lang="es"),
        lambda: runner.translate_with_scores(["a"], target_lang="es"),
        lambda: runner.tagged_sources(["a"], "es"),
        lambda: runner.translate(["a"]),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="target_lang"):
            call()
    assert runner.calls == []


def test_the_length_limit_leaves_room_for_the_tag():
    runner = TaggedReverser()
    runner.settings = runner.settings.replace(max_input_length=16)
    with pytest.warns(RuntimeWarning):  # its words' 12 tokens and the tag's 7 > 15
        runner.translate(["aaaa bbbb cccc"], target_lang="de")
    # Pieces of whole words of at most 15 - 7 tokens, each tagged.
    assert sorted(runner.calls[0]) == [">>de<< aaaa bbbb", ">>de<< cccc"]


def test_an_opus_mt_models_text_without_a_tag_is_translated_as_it_is():
    opus = TargetLanguages(("deu", "fra"), required=False)
    assert not opus.requires_target_lang and KNOWN.requires_target_lang
    texts = ["A dog.", ">>fra<< A cat. A cow."]
    assert opus.requested(texts, None) == (["A dog.", "A cat. A cow."], [None, "fra"])
    with pytest.raises(ValueError, match="knows: 'deu', 'fra'"):
        opus.requested(["A dog."], "es")


def test_an_empty_text_is_never_tagged():
    assert KNOWN.tagged("", "fr") == "" and KNOWN.tagged("  ", "fr") == "  "


def test_a_texts_own_tags_never_choose_its_language():
    """With `target_lang="de"`, a text holding `>>fr<<` reached the model
    with both tags: a user's text chose the language."""
    assert KNOWN.tagged("A >>fr<< dog.", "de") == ">>de<< A dog."
    assert KNOWN.tagged(">>fr<< A dog.>>cs<<", "de") == ">>de<< A dog."
    assert KNOWN.tagged("A >>xx<< dog.", "de") == ">>de<< A >>xx<< dog."  # not a tag of it
    texts, codes = KNOWN.requested([">>fr<< A >>de<< dog."], None)  # the typed one asks
    assert (texts, codes) == (["A dog."], ["fr"])
    runner = TaggedReverser()
    runner.translate(["A dog >>cs<< runs."], target_lang="de")
    assert runner.calls[-1] == [">>de<< A dog runs."]
    assert TargetLanguages().untagged("A >>fr<< dog.") == "A >>fr<< dog."  # one language


def test_an_empty_text_needs_no_language_among_typed_ones():
    """An empty text among texts with typed tags refused the whole request
    ("pass `target_lang`"); it translates to an empty text."""
    texts, codes = KNOWN.requested(["", ">>fr<< A dog.", "  "], None)
    assert (texts, codes) == (["", "A dog.", "  "], [None, "fr", None])
    with pytest.raises(ValueError, match="pass `target_lang`"):
        KNOWN.requested(["A dog."], None)
    assert TaggedReverser().translate(["", ">>fr<< A dog."]) == [
        "",
        reversed_tagged("A dog.", "fr"),
    ]


def reversed_tagged(text, code):
    return f">>{code}<< {text}"[::-1]
